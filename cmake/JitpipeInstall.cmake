# `cmake --install` puts the libraries, their headers and a CMake package in the
# prefix, so that another project can find_package(jitpipe) and link
# jitpipe::jitpipe (everything) or a single folder's library (jitpipe::ir, ...).
include(CMakePackageConfigHelpers)

get_property(_jitpipe_libs GLOBAL PROPERTY JITPIPE_LIBRARIES)

# The umbrella target (the CLI executable owns the plain name "jitpipe").
add_library(jitpipe_all INTERFACE)
add_library(jitpipe::jitpipe ALIAS jitpipe_all)
set_target_properties(jitpipe_all PROPERTIES EXPORT_NAME jitpipe)
target_link_libraries(jitpipe_all INTERFACE ${_jitpipe_libs})

install(TARGETS ${_jitpipe_libs} jitpipe_all
  EXPORT jitpipeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(dir base scheduler memory comm stages runtime traces planning)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/jitpipe
    FILES_MATCHING PATTERN "*.h")
endforeach()

install(EXPORT jitpipeTargets
  NAMESPACE jitpipe::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/jitpipe)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/jitpipeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/jitpipeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/jitpipe)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/jitpipeConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/jitpipeConfig.cmake
  ${PROJECT_BINARY_DIR}/jitpipeConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/jitpipe)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/jitpipe)
