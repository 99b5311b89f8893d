# Small shipped programs (issue 47; README, "Build"). The libraries compile every function and datum
# into a section of its own, so that linking a program drops whatever nothing in it reaches
# (--gc-sections: a one-process program keeps no optimizer or model it never names) and, where the
# linker can, folds functions whose machine code is identical (--icf: gold, which binutils ships
# beside ld; without it the program links with the default linker and is merely larger).
#   weft_use_sections(TARGET)        compile TARGET's C++ with -ffunction-sections -fdata-sections
#   weft_small_program_link(TARGET)  link TARGET with --gc-sections and, with gold, --icf=safe
# CUDA and sanitizer builds keep their usual link: their binaries are not the ones shipped small.
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=gold;LINKER:--icf=safe" WEFT_HAVE_GOLD_ICF)
if(NOT WEFT_HAVE_GOLD_ICF)
  message(STATUS "weft: gold with --icf not found; programs link without identical-code folding")
endif()

function(weft_use_sections target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-ffunction-sections>
                                           $<$<COMPILE_LANGUAGE:CXX>:-fdata-sections>)
endfunction()

function(weft_small_program_link target)
  if(WEFT_CUDA OR WEFT_SANITIZE OR WEFT_TSAN)
    return()
  endif()
  target_link_options(${target} PRIVATE LINKER:--gc-sections)
  if(WEFT_HAVE_GOLD_ICF)
    target_link_options(${target} PRIVATE -fuse-ld=gold LINKER:--icf=safe)
  endif()
endfunction()
