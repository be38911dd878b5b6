# admit_auto_option(NAME DOC DETECTED): a boolean cache option whose default is DETECTED — whether the part's
# dependencies were found.
#
# option() alone keeps the first configure's answer for good: a build directory configured before
# scripts/install-deps.sh had run left the part off after they were installed, and built without it, silently. Here an
# option nobody set follows detection at every configure, as in a fresh build directory, and a configure that changes
# it says so. A value set by hand (-DNAME=..., ccmake) other than the detected one is kept from then on. (A -DNAME=OFF
# given while OFF was also the detected value cannot be told from it: the configure that turns NAME on says how to keep
# it off.)
function(admit_auto_option name doc detected)
  set(found OFF)
  if(detected)
    set(found ON)
  endif()
  set(tracked ADMIT_AUTO_OPTION_${name})
  if(NOT DEFINED CACHE{${name}})
    set(${name} ${found} CACHE BOOL "${doc}")
    set(${tracked} ${found} CACHE INTERNAL "The value detection last gave ${name}")
    return()
  endif()
  set(current OFF)
  if(${name})
    set(current ON)
  endif()
  if(NOT DEFINED CACHE{${tracked}} OR NOT current STREQUAL ${tracked})
    unset(${tracked} CACHE)  # set by hand: kept
    set(${name} ${current} CACHE BOOL "${doc}" FORCE)  # (a -D without a type: typed, its value kept)
  elseif(NOT found STREQUAL current)
    set(${name} ${found} CACHE BOOL "${doc}" FORCE)
    set(${tracked} ${found} CACHE INTERNAL "The value detection last gave ${name}")
    if(found)
      message(STATUS "${name} is ON now that its dependencies are found (-D${name}=OFF keeps it off)")
    else()
      message(STATUS "${name} is OFF now that its dependencies are not all found")
    endif()
  endif()
endfunction()
