# opencl.cmake: the OpenCL backend (core/opencl), with core/device/kernels.cl embedded as a string
# (compiled by the OpenCL runtime), and CLBlast's SGEMM as the golden GEMM when it is installed.
if(NOT OpenCL_FOUND)
  message(FATAL_ERROR "PEAT_OPENCL=ON but no OpenCL headers and ICD loader were found: install "
                      "opencl-headers ocl-icd-opencl-dev (and pocl-opencl-icd for a CPU device), "
                      "or configure with -DPEAT_OPENCL=OFF")
endif()
set(cl_src ${CMAKE_SOURCE_DIR}/core/device/kernels.cl)
set(cl_gen ${CMAKE_BINARY_DIR}/gen/device_kernels_source.c)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${cl_src})
# a byte array, not a string literal: ISO C limits literals to 4095 characters
file(READ ${cl_src} cl_hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," cl_bytes "${cl_hex}")
file(WRITE ${cl_gen}.tmp "/* generated from core/device/kernels.cl by cmake/opencl.cmake */\n"
  "extern const char peat_device_kernels_source[];\n"
  "const char peat_device_kernels_source[] = {${cl_bytes} 0};\n")
configure_file(${cl_gen}.tmp ${cl_gen} COPYONLY)
add_library(peat_opencl STATIC ${CMAKE_SOURCE_DIR}/core/opencl/opencl.c ${cl_gen})
target_link_libraries(peat_opencl PUBLIC peat_device peat_core OpenCL::OpenCL)
target_compile_definitions(peat_opencl PUBLIC PEAT_HAVE_OPENCL=1)
find_library(CLBLAST_LIB clblast)
find_path(CLBLAST_INC clblast_c.h)
if(CLBLAST_LIB AND CLBLAST_INC)
  target_link_libraries(peat_opencl PUBLIC ${CLBLAST_LIB})
  target_include_directories(peat_opencl PRIVATE ${CLBLAST_INC})
  target_compile_definitions(peat_opencl PRIVATE PEAT_HAVE_CLBLAST=1)
  message(STATUS "OpenCL backend: golden GEMM through CLBlast (${CLBLAST_LIB})")
else()
  message(STATUS "OpenCL backend: no CLBlast, the golden GEMM is the reference device kernel")
endif()
list(APPEND PEAT_GPU_LIBS peat_opencl)
