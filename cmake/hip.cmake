# hip.cmake: builds the GPU backend for AMD from the same core/gpu/*.cu source with hipcc
# (Debian's hipcc, libamdhip64-dev; hipBLAS when installed), as a static library peat_gpu, and the
# example device plugin (examples/plugin_gemm_device.cu) as a HIP plugin.
find_program(HIPCC hipcc)
find_library(AMDHIP64 amdhip64)
if(NOT HIPCC OR NOT AMDHIP64)
  message(FATAL_ERROR "PEAT_HIP=ON but hipcc or libamdhip64 was not found: install hipcc and "
                      "libamdhip64-dev (scripts/install-deps.sh --hip), or configure with -DPEAT_HIP=OFF")
endif()
if(NOT PEAT_HIP_ARCHITECTURES)
  set(PEAT_HIP_ARCHITECTURES "gfx90a;gfx942")
endif()
# an older hipcc (Debian's 5.x clang) may not know the newest targets: keep those it compiles
set(HIP_ARCH_FLAGS "")
file(WRITE ${CMAKE_BINARY_DIR}/hip_probe.hip "#include <hip/hip_runtime.h>\n__global__ void k() {}\n")
foreach(a ${PEAT_HIP_ARCHITECTURES})
  execute_process(COMMAND ${HIPCC} -x hip --offload-arch=${a} -c ${CMAKE_BINARY_DIR}/hip_probe.hip
                          -o ${CMAKE_BINARY_DIR}/hip_probe.o
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    list(APPEND HIP_ARCH_FLAGS --offload-arch=${a})
  else()
    message(WARNING "hipcc (${HIPCC}) cannot target ${a}: left out of this build")
  endif()
endforeach()
if(NOT HIP_ARCH_FLAGS)
  message(FATAL_ERROR "hipcc compiles for none of PEAT_HIP_ARCHITECTURES (${PEAT_HIP_ARCHITECTURES})")
endif()
set(HIP_FLAGS -x hip -std=c++17 -O2 -fPIC ${HIP_ARCH_FLAGS} -D__HIP_PLATFORM_AMD__
              -I${CMAKE_SOURCE_DIR}/include -I${PEAT_INC}/core -I${CMAKE_SOURCE_DIR}/core/gpu
              -I${CMAKE_SOURCE_DIR}/core/device)
file(GLOB GPU_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/core/gpu/*.cu)
set(HIP_OBJS "")
foreach(src ${GPU_SRC})
  get_filename_component(n ${src} NAME_WE)
  set(obj ${CMAKE_BINARY_DIR}/hip_${n}.o)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${HIPCC} ${HIP_FLAGS} -c ${src} -o ${obj}
    DEPENDS ${src} ${CMAKE_SOURCE_DIR}/core/gpu/vendors/hip.h ${CMAKE_SOURCE_DIR}/core/device/kernels.cl
            ${CMAKE_SOURCE_DIR}/core/backend_impl.h
    COMMENT "hipcc ${n}.cu")
  list(APPEND HIP_OBJS ${obj})
endforeach()
add_library(peat_gpu STATIC ${HIP_OBJS})
set_target_properties(peat_gpu PROPERTIES LINKER_LANGUAGE C)
find_library(HIPBLAS hipblas)
target_link_libraries(peat_gpu PUBLIC peat_device peat_core ${AMDHIP64} $<$<BOOL:${HIPBLAS}>:${HIPBLAS}> stdc++)
target_compile_definitions(peat_gpu PUBLIC PEAT_HAVE_GPU=1 PEAT_HAVE_HIP=1)
list(APPEND PEAT_GPU_LIBS peat_gpu)
# the example device plugin, from the same .cu as the CUDA one
set(hip_plugin ${CMAKE_BINARY_DIR}/libpeat_example_gemm_hip.so)
add_custom_command(OUTPUT ${hip_plugin}
  COMMAND ${HIPCC} ${HIP_FLAGS} -shared ${CMAKE_SOURCE_DIR}/examples/plugin_gemm_device.cu -o ${hip_plugin}
  DEPENDS ${CMAKE_SOURCE_DIR}/examples/plugin_gemm_device.cu ${CMAKE_SOURCE_DIR}/include/peat/plugin.h
  COMMENT "hipcc example device plugin")
add_custom_target(peat_example_hip ALL DEPENDS ${hip_plugin})
