# auto_option.cmake: build options that follow the machine unless the user set them.
#
# option() keeps the first configure's default in the cache forever: a build directory configured
# before PoCL (or Criterion, MPI) was installed kept PEAT_OPENCL=OFF after the install, and the
# README's second command failed (issue 46). An automatic option is instead derived again from what
# is found at every configure, and stays as the user set it once given: -DNAME=ON|OFF on a command
# line (CMake marks such an entry with its own help string until the next option() call), or an
# edit in ccmake/cmake-gui (the value no longer equals the last derived one, kept in NAME_AUTO).
# -DNAME=AUTO (or -UNAME) hands it back to the machine.

set(PEAT_CMDLINE_HELP "No help, variable specified on the command line.")

# peat_auto_option(NAME HELP DETECTED WHY): NAME is ON/OFF as the user gave it, else DETECTED;
# WHY says what was (not) found, in the configure's one line about an automatic NAME.
function(peat_auto_option name help detected why)
  get_property(in_cache CACHE ${name} PROPERTY VALUE SET)
  get_property(help_now CACHE ${name} PROPERTY HELPSTRING)
  set(value "${${name}}")
  set(given OFF)
  if(NOT in_cache OR value STREQUAL "AUTO")
    set(given OFF)
  elseif(help_now STREQUAL PEAT_CMDLINE_HELP)
    set(given ON) # -DNAME=... on this configure's command line
  elseif(${name}_GIVEN)
    set(given ON) # given on an earlier configure: it sticks
  elseif(DEFINED CACHE{${name}_AUTO})
    # a cache edited by hand or in ccmake: the value left the one derived last time
    if((value AND NOT ${name}_AUTO) OR (NOT value AND ${name}_AUTO))
      set(given ON)
    endif()
  elseif(NOT help_now STREQUAL help)
    set(given ON) # an initial cache (cmake -C) or a preset with its own help
  endif()
  if(detected)
    set(detected ON)
  else()
    set(detected OFF)
  endif()
  if(given)
    if(value)
      set(value ON)
    else()
      set(value OFF)
    endif()
    set(${name} ${value} CACHE BOOL "${help}" FORCE)
    message(STATUS "${name}: ${value} (given on a command line; -D${name}=AUTO would follow the machine)")
  else()
    set(${name} ${detected} CACHE BOOL "${help}" FORCE)
    message(STATUS "${name}: ${detected} (automatic: ${why})")
  endif()
  set(${name}_GIVEN ${given} CACHE INTERNAL "${name} was set by the user (cmake/auto_option.cmake)")
  set(${name}_AUTO ${detected} CACHE INTERNAL "${name}'s value derived at the last configure")
endfunction()
