# The one spelling of a WebAssembly build's name, from its three features (MASKATTN_WASM_SIMD,
# MASKATTN_WASM_RELAXED, MASKATTN_WASM_THREADS): the npm package's build name without "maskattn-"
# (js/builds.js), the installed C++ library (libmaskattn-<name>.a) and its export file
# (maskattn-wasm-<name>-targets.cmake). Read by CMakeLists.txt, by the installed package config
# (installed beside it) and by tests/js/build-names.test.mjs, which checks it against js/builds.js.
# No include_guard: consumers may run an older CMake, and defining the functions twice is harmless.

# <out> = the build's name: simd or scalar, then -relaxed, then -threads.
function(maskattn_wasm_build_name out simd relaxed threads)
  if(simd)
    set(name simd)
  else()
    set(name scalar)
  endif()
  if(relaxed)
    string(APPEND name -relaxed)
  endif()
  if(threads)
    string(APPEND name -threads)
  endif()
  set(${out} ${name} PARENT_SCOPE)
endfunction()

# <out> = every name a build can have (relaxed SIMD extends SIMD128: no scalar-relaxed), derived
# from the rule above so that the two never disagree.
function(maskattn_wasm_build_names out)
  set(names "")
  foreach(simd IN ITEMS ON OFF)
    foreach(relaxed IN ITEMS OFF ON)
      if(relaxed AND NOT simd)
        continue()
      endif()
      foreach(threads IN ITEMS OFF ON)
        maskattn_wasm_build_name(name ${simd} ${relaxed} ${threads})
        list(APPEND names ${name})
      endforeach()
    endforeach()
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# <out> = the build a user's MASKATTN_WASM_FLAVOR names. Before the names were unified, a flavour
# was named after its kernel (simd128, relaxed, each with an optional -threads); a consumer's
# CMakeLists.txt that still sets one must keep working, so those map to the build they meant.
# Anything else is a configure error that lists the valid names.
function(maskattn_wasm_flavor_name out given)
  set(name "${given}")
  if(name MATCHES "^(simd128|relaxed)(-threads)?$")
    set(relaxed OFF)
    set(threads OFF)
    if(CMAKE_MATCH_1 STREQUAL "relaxed")
      set(relaxed ON)
    endif()
    if(CMAKE_MATCH_2)
      set(threads ON)
    endif()
    maskattn_wasm_build_name(name ON ${relaxed} ${threads})
  endif()
  maskattn_wasm_build_names(valid)
  list(FIND valid "${name}" found)
  if(found EQUAL -1)
    string(REPLACE ";" ", " valid "${valid}")
    message(FATAL_ERROR "MASKATTN_WASM_FLAVOR: '${given}' is not a WebAssembly build of maskattn; valid names: ${valid} (the earlier simd128 and relaxed, with or without -threads, are still accepted)")
  endif()
  set(${out} ${name} PARENT_SCOPE)
endfunction()
