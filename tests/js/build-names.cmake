# The CMake side of tests/js/build-names.test.mjs, in script mode (no compiler, no Emscripten):
#   cmake -DMASKATTN_WASM_SIMD=.. -DMASKATTN_WASM_RELAXED=.. -DMASKATTN_WASM_THREADS=.. -P build-names.cmake
#       prints the name CMake gives that build (its library, export file and npm module)
#   cmake -DFLAVOR=NAME -P build-names.cmake
#       prints the build a consumer's MASKATTN_WASM_FLAVOR names, or fails as find_package would
#   cmake -DPREFIX=DIR -DINSTALLED="a;b" -P build-names.cmake
#       lays out an Emscripten install of the package config in DIR as `cmake --install` does,
#       with a stand-in targets file for each installed build (it records which one was included)
cmake_minimum_required(VERSION 3.18)
set(root ${CMAKE_CURRENT_LIST_DIR}/../..)
include(${root}/cmake/maskattnWasmBuild.cmake)

if(DEFINED PREFIX)
  include(CMakePackageConfigHelpers)
  set(EMSCRIPTEN 1)  # the config file's WebAssembly branch, as an emcmake build configures it
  set(dir ${PREFIX}/lib/cmake/maskattn)
  configure_package_config_file(${root}/cmake/maskattnConfig.cmake.in ${dir}/maskattnConfig.cmake
    INSTALL_DESTINATION lib/cmake/maskattn INSTALL_PREFIX ${PREFIX})
  file(COPY ${root}/cmake/maskattnWasmBuild.cmake DESTINATION ${dir})
  foreach(name IN LISTS INSTALLED)
    file(WRITE ${dir}/maskattn-wasm-${name}-targets.cmake
      "set(MASKATTN_TEST_INCLUDED ${name})\nadd_library(maskattn::maskattn INTERFACE IMPORTED)\n")
  endforeach()
elseif(DEFINED FLAVOR)
  maskattn_wasm_flavor_name(name "${FLAVOR}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${name}")
else()
  foreach(option IN ITEMS SIMD RELAXED THREADS)
    if(NOT DEFINED MASKATTN_WASM_${option})
      message(FATAL_ERROR "build-names.cmake: pass -DMASKATTN_WASM_${option}=ON or OFF")
    endif()
  endforeach()
  maskattn_wasm_build_name(name "${MASKATTN_WASM_SIMD}" "${MASKATTN_WASM_RELAXED}" "${MASKATTN_WASM_THREADS}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${name}")
endif()
