# find_package(Hab) gives Hab::hab (libhab.so) and Hab::hab_static (libhab.a), with hab.h's
# directory as their include directory. Found relative to this file (lib/cmake/Hab), so an
# installed tree may move.
get_filename_component(_hab_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include(CMakeFindDependencyMacro)
find_dependency(Threads)

if(NOT TARGET Hab::hab)
  add_library(Hab::hab SHARED IMPORTED)
  set_target_properties(Hab::hab PROPERTIES
    IMPORTED_LOCATION "${_hab_prefix}/lib/libhab.so.1"
    IMPORTED_SONAME "libhab.so.1"
    INTERFACE_INCLUDE_DIRECTORIES "${_hab_prefix}/include")
endif()
if(NOT TARGET Hab::hab_static)
  add_library(Hab::hab_static STATIC IMPORTED)
  set_target_properties(Hab::hab_static PROPERTIES
    IMPORTED_LOCATION "${_hab_prefix}/lib/libhab.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_hab_prefix}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS};m")
endif()
unset(_hab_prefix)
