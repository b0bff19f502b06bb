# hip.cmake: builds the GPU backend for AMD from the same core/gpu/*.cu source with hipcc
# (Debian's hipcc, libamdhip64-dev; hipBLAS when installed), as an object library peat_gpu.
find_program(HIPCC hipcc REQUIRED)
file(GLOB GPU_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/core/gpu/*.cu)
set(PEAT_HIP_OFFLOAD_ARCH "gfx90a;gfx1030" CACHE STRING "AMD GPU targets for hipcc")
set(HIP_ARCH_FLAGS "")
foreach(a ${PEAT_HIP_OFFLOAD_ARCH})
  list(APPEND HIP_ARCH_FLAGS --offload-arch=${a})
endforeach()
set(HIP_OBJS "")
foreach(src ${GPU_SRC})
  get_filename_component(n ${src} NAME_WE)
  set(obj ${CMAKE_BINARY_DIR}/hip_${n}.o)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${HIPCC} -x hip -std=c++17 -O2 -fPIC ${HIP_ARCH_FLAGS} -D__HIP_PLATFORM_AMD__
            -I${CMAKE_SOURCE_DIR}/include -I${PEAT_INC}/core -I${CMAKE_SOURCE_DIR}/core/gpu
            -c ${src} -o ${obj}
    DEPENDS ${src} ${CMAKE_SOURCE_DIR}/core/gpu/vendors/hip.h
    COMMENT "hipcc ${n}.cu")
  list(APPEND HIP_OBJS ${obj})
endforeach()
add_library(peat_gpu STATIC ${HIP_OBJS})
set_target_properties(peat_gpu PROPERTIES LINKER_LANGUAGE C)
find_library(AMDHIP64 amdhip64 REQUIRED)
find_library(HIPBLAS hipblas)
target_link_libraries(peat_gpu PUBLIC peat_core ${AMDHIP64} $<$<BOOL:${HIPBLAS}>:${HIPBLAS}> stdc++)
target_compile_definitions(peat_gpu PUBLIC PEAT_HAVE_GPU=1 PEAT_HAVE_HIP=1)
list(APPEND PEAT_GPU_LIBS peat_gpu)
