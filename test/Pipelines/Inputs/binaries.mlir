// Hand-written gpu.binary ops for extract-ptx.test (not real kernels).
module attributes {gpu.container_module} {
  gpu.binary @plain [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = ".version 8.0\0A.target sm_90\0A\09// a \22quoted\22 \5C comment\0A">]
  gpu.binary @unresolved [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = ".version 8.0\0A.target sm_90\0A.extern .func  (.param .b32 func_retval0) __nv_expf(\0A\09.param .b32 __nv_expf_param_0\0A);\0A">]
}
