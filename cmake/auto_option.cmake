# admit_auto_option(NAME DOC DETECTED): a boolean cache option whose default is DETECTED — whether the part's
# dependencies were found.
#
# option() alone keeps the first configure's answer for good: a build directory configured before
# scripts/install-deps.sh had run left the part off after they were installed, and built without it, silently. Here an
# option nobody set follows detection at every configure, as in a fresh build directory, and a configure that changes
# it says so. A value set by hand (-DNAME=..., ccmake) other than the detected one is kept from then on. (A -DNAME=OFF
# given while OFF was also the detected value cannot be told from it: the configure that turns NAME on says how to keep
# it off.) A cache that option() wrote — the entry there, with this help text, and no record of detection — is
# taken as detected: such a build directory is the one the first configure left without the part.
function(admit_auto_option name doc detected)
  set(found OFF)
  if(detected)
    set(found ON)
  endif()
  # What detection last gave NAME, or HAND once NAME was set by hand.
  set(tracked ADMIT_AUTO_OPTION_${name})
  if(NOT DEFINED CACHE{${name}})
    set(${name} ${found} CACHE BOOL "${doc}")
    set(${tracked} ${found} CACHE INTERNAL "")
    return()
  endif()
  set(current OFF)
  if(${name})
    set(current ON)
  endif()
  if(NOT DEFINED CACHE{${tracked}})
    get_property(help CACHE ${name} PROPERTY HELPSTRING)
    get_property(type CACHE ${name} PROPERTY TYPE)
    if(help STREQUAL doc AND type STREQUAL "BOOL")
      set(${tracked} ${current} CACHE INTERNAL "")  # option()'s
    else()
      set(${tracked} HAND CACHE INTERNAL "")  # a -D before the first configure
    endif()
  endif()
  if(NOT ${tracked} STREQUAL "HAND" AND NOT current STREQUAL ${tracked})
    set(${tracked} HAND CACHE INTERNAL "")  # set by hand since
  endif()
  if(${tracked} STREQUAL "HAND")
    set(${name} ${current} CACHE BOOL "${doc}" FORCE)  # (a -D without a type: typed, its value kept)
  elseif(NOT found STREQUAL current)
    set(${name} ${found} CACHE BOOL "${doc}" FORCE)
    set(${tracked} ${found} CACHE INTERNAL "")
    if(found)
      message(STATUS "${name} is ON now that its dependencies are found (-D${name}=OFF keeps it off)")
    else()
      message(STATUS "${name} is OFF now that its dependencies are not all found")
    endif()
  endif()
endfunction()
