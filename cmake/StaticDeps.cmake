# Static linking of mltunectl.
#
# A switch is a few dozen file writes, so mltunectl's run time is dominated by
# process start-up: resolving libstdc++'s symbols alone costs more than the
# writes, and a PIE's relocations touch hundreds of pages (expensive in an
# emulated guest: 75 ms against 16 ms per `nic apply` under qemu TCG).
# With MLTUNE_STATIC_DEPS (the default outside sanitizer builds) mltunectl is
# one static, non-PIE executable, as Go node agents are: no dynamic loader,
# no relocations, runs on any x86-64 Linux. The price: the main binary is not
# address-randomised, and the first C++ exception thrown (only --help,
# --version and input errors throw) sorts the unwind tables (~3 ms, once:
# `mltunectl --version` takes 4.6 ms, `profile list` 1.5 ms).
# libnl's static archives reference getaddrinfo()/getprotobyname(), which
# the linker warns about in static binaries; mltunectl never calls them.
# Falls back to static libstdc++/libnl/libbpf with a shared glibc, then to
# shared libraries, when archives are missing.
option(MLTUNE_STATIC_DEPS "Link mltunectl statically (libstdc++, libnl, libbpf, glibc)" ON)
if(MLTUNE_SANITIZE)
  set(MLTUNE_STATIC_DEPS OFF)
endif()
set_property(GLOBAL PROPERTY MLTUNE_ALL_STATIC ${MLTUNE_STATIC_DEPS})

# mltune_prefer_static(NAME SHARED_TARGET ARCHIVES a.a... [DEPS lib...])
# Defines the interface library NAME: the static ARCHIVES plus DEPS when
# MLTUNE_STATIC_DEPS is on and every archive exists, else SHARED_TARGET.
function(mltune_prefer_static name shared)
  cmake_parse_arguments(A "" "" "ARCHIVES;DEPS" ${ARGN})
  add_library(${name} INTERFACE)
  set(paths "")
  if(MLTUNE_STATIC_DEPS)
    foreach(a IN LISTS A_ARCHIVES)
      find_library(_p NAMES ${a} NO_CACHE)
      if(NOT _p)
        message(STATUS "mltune: ${a} not found, linking ${shared} dynamically")
        set_property(GLOBAL PROPERTY MLTUNE_ALL_STATIC OFF)
        set(paths "")
        break()
      endif()
      list(APPEND paths ${_p})
      unset(_p)
    endforeach()
  endif()
  if(paths)
    get_target_property(inc ${shared} INTERFACE_INCLUDE_DIRECTORIES)
    target_include_directories(${name} SYSTEM INTERFACE ${inc})
    target_link_libraries(${name} INTERFACE ${paths} ${A_DEPS})
  else()
    target_link_libraries(${name} INTERFACE ${shared})
  endif()
endfunction()

# mltune_link_static(TARGET): the link options for an executable.
function(mltune_link_static target)
  if(NOT MLTUNE_STATIC_DEPS)
    return()
  endif()
  get_property(all GLOBAL PROPERTY MLTUNE_ALL_STATIC)
  find_library(_libc_a NAMES libc.a NO_CACHE)
  if(all AND _libc_a)
    target_link_options(${target} PRIVATE -static -no-pie)
  else()
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
