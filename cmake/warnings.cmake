# Warning flags for project targets only (third-party headers come in as SYSTEM includes).
set(CHERENKOV_WARNINGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2)
if(CHERENKOV_WERROR)
  list(APPEND CHERENKOV_WARNINGS -Werror)
endif()

function(cherenkov_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CHERENKOV_WARNINGS}>)
endfunction()
