# cherenkov_layer(NAME DIR DEPS...): a static library from every .cpp under src/DIR
# (and .cu files when CUDA is on), linking the layers below it. Globbing keeps one concept per
# file cheap: adding a file needs no CMake edit.
function(cherenkov_layer name dir)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cpp)
  if(CHERENKOV_HAVE_CUDA)
    file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cu)
    # Stand-ins for CUDA code (cuda/unavailable.cpp, cuda/<family>_unavailable.cpp) drop out.
    list(FILTER sources EXCLUDE REGEX "/cuda/([a-z0-9_]+_)?unavailable\\.cpp$")
    list(APPEND sources ${cuda_sources})
  endif()
  if(sources)
    add_library(${name} STATIC ${sources})
    target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} PUBLIC ${ARGN})
    cherenkov_warnings(${name})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${ARGN})
  endif()
endfunction()

# cherenkov_test(NAME DIR LIBS...): one GoogleTest binary from tests/DIR/**/*_test.cpp.
function(cherenkov_test name dir)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${dir}/*_test.cpp)
  if(NOT CHERENKOV_HAVE_CUDA)
    # The op-vs-CPU harness (tests/engine/cuda/ops_vs_cpu_*) calls the CUDA launchers directly,
    # which needs the CUDA runtime headers.
    list(FILTER sources EXCLUDE REGEX "/cuda/ops_vs_cpu_[a-z0-9_]+_test\\.cpp$")
  endif()
  if(NOT sources)
    return()
  endif()
  add_executable(${name} ${sources})
  target_link_libraries(${name} PRIVATE ${ARGN} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE
    CHERENKOV_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  cherenkov_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${dir})
endfunction()
