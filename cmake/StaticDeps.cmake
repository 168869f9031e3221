# Static linking of mltunectl's libraries.
#
# A switch is a few dozen file writes, so mltunectl's run time is dominated by
# process start-up: resolving libstdc++'s symbols alone costs more than the
# writes.  With MLTUNE_STATIC_DEPS (the default outside sanitizer builds)
# libstdc++, libgcc, libnl and libbpf are linked statically and only glibc
# stays shared; the binary still runs on any glibc >= the build host's.
option(MLTUNE_STATIC_DEPS "Link libstdc++, libgcc, libnl and libbpf statically into mltunectl" ON)
if(MLTUNE_SANITIZE)
  set(MLTUNE_STATIC_DEPS OFF)
endif()

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
