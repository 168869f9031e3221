# Compiler flags shared by every mltune target (interface library mltune_flags).
add_library(mltune_flags INTERFACE)
target_compile_options(mltune_flags INTERFACE -Wall -Wextra -Wpedantic -Werror)

if(MLTUNE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MLTUNE_FUZZ=ON needs clang (CXX=clang++-16)")
  endif()
  set(MLTUNE_SANITIZE ON)
  # Coverage instrumentation for the library code the fuzz targets drive.
  target_compile_options(mltune_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()

if(MLTUNE_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_compile_options(mltune_flags INTERFACE ${_san})
  target_link_options(mltune_flags INTERFACE ${_san})
endif()
