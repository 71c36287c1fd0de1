# cherenkov_web_assets(TARGET DIR): compiles every file under DIR into TARGET as bytes
# (cmake/embed_files.cmake), regenerated when a file changes, is added or is removed.
function(cherenkov_web_assets target dir)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${dir}/*.html ${dir}/*.js ${dir}/*.css ${dir}/*.svg)
  list(SORT files)
  set(output ${CMAKE_BINARY_DIR}/generated/web_assets.cpp)
  string(REPLACE ";" "|" file_list "${files}")
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DDIR=${dir} -DFILES=${file_list}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding the chat page (${dir})"
    VERBATIM)
  target_sources(${target} PRIVATE ${output})
endfunction()
