//===- SlotLedger.cpp - the slot bookkeeping of the pool stores -----------===//

#include "SlotLedger.h"

#include <string>

using namespace kpool;
using namespace kpool::detail;

bool kpool::ringHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                             int64_t end) {
  return accepted % kpool == 0 || end - accepted / kpool * kpool <= window;
}

SlotLedger::SlotLedger(int64_t maxSlots, int64_t kpool, int64_t window)
    : slots(maxSlots), K(kpool), R(window) {}

Status SlotLedger::checkSlot(const char *op, uint32_t slot) const {
  if (has(slot))
    return Status();
  return Status::error(
      std::string(op) + ": slot " + std::to_string(slot) +
      " is not below max_slots = " + std::to_string(maxSlots()));
}

SlotInfo SlotLedger::info(uint32_t slot) const {
  const Slot &s = slots[slot];
  return SlotInfo{s.length, s.stepBegin, s.ringEnd};
}

void SlotLedger::cacheLengths(const std::vector<uint32_t> &slotIdx,
                              std::vector<uint32_t> &out) const {
  out.resize(slotIdx.size());
  for (size_t b = 0; b < slotIdx.size(); ++b)
    out[b] = has(slotIdx[b]) ? slots[slotIdx[b]].length : 0;
}

Status SlotLedger::checkGrowth(const std::vector<uint32_t> &iro,
                               const std::vector<uint32_t> &slotIdx) const {
  for (size_t b = 0; b < slotIdx.size(); ++b) {
    uint32_t slot = slotIdx[b];
    int64_t length = slots[slot].length, tokens = int64_t(iro[b + 1]) - iro[b];
    if (length + tokens > int64_t(UINT32_MAX))
      return Status::error(
          "step: request " + std::to_string(b) + " (slot " +
          std::to_string(slot) + "): its length would pass 2^32 - 1 tokens (" +
          std::to_string(length) + " + " + std::to_string(tokens) +
          "; cache lengths are unsigned 32-bit)");
  }
  return Status();
}

void SlotLedger::produced(uint32_t slot, int64_t tokens,
                          std::vector<ProducedPool> &out) const {
  int64_t c = slots[slot].length;
  for (int64_t p = c / K; p < (c + tokens) / K; ++p)
    out.push_back({slot, p, p * K < c});
}

void SlotLedger::commitStep(const std::vector<uint32_t> &iro,
                            const std::vector<uint32_t> &slotIdx) {
  for (size_t b = 0; b < slotIdx.size(); ++b) {
    Slot &s = slots[slotIdx[b]];
    s.stepBegin = s.length;
    s.length += iro[b + 1] - iro[b];
    s.ringEnd = s.length;
  }
}

Status SlotLedger::checkAccept(uint32_t slot, int64_t accepted,
                               int64_t &length) const {
  std::string where = "accept: slot " + std::to_string(slot) + ": ";
  if (!has(slot))
    return Status::error(where +
                         "not below max_slots = " + std::to_string(maxSlots()));
  const Slot &s = slots[slot];
  int64_t begin = s.stepBegin, held = int64_t(s.length) - begin;
  if (accepted < 0 || accepted > held)
    return Status::error(where + "accepted = " + std::to_string(accepted) +
                         " is outside [0, " + std::to_string(held) +
                         "] (the tokens held from its last step, positions [" +
                         std::to_string(begin) + ", " +
                         std::to_string(begin + held) + "))");
  length = begin + accepted;
  int64_t end = s.ringEnd;
  if (ringHoldsPending(K, R, length, end))
    return Status();
  int64_t first = length / K * K;
  return Status::error(
      where + "keeping " + std::to_string(accepted) + " token(s) (length " +
      std::to_string(length) + ") needs positions " + std::to_string(first) +
      ".." + std::to_string(length - 1) + " of pool " +
      std::to_string(length / K) +
      " in the ring, but its last step wrote up to position " +
      std::to_string(end - 1) + " and a window of " + std::to_string(R) +
      " rows keeps only positions " + std::to_string(end - R) +
      " and later; a ring window of at least " + std::to_string(end - first) +
      " rows would hold them");
}

void SlotLedger::commitAccept(uint32_t slot, int64_t length) {
  slots[slot].length = static_cast<uint32_t>(length);
}
