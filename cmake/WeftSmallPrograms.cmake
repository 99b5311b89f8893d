# Small shipped programs (issue 47; README, "Build"). The libraries compile every function and datum
# into a section of its own, so that linking a program drops whatever nothing in it reaches
# (--gc-sections: a one-process program keeps no optimizer or model it never names) and, where the
# linker can, folds functions whose machine code is identical (--icf: gold, which binutils ships
# beside ld; without it the program links with the default linker and is merely larger).
#   weft_use_sections(TARGET)        compile TARGET's C++ with -ffunction-sections -fdata-sections
#   weft_small_program_link(TARGET)  link TARGET with --gc-sections and, with gold, --icf=safe
# The cold sources below are compiled for size (-Os, which takes a half to two thirds off each):
# parsers, file formats, configuration, printing and bookkeeping that run once per load, step or
# call, never once per element (the models' files among them: a forward there is a few calls per
# layer into the ops; at -Os weft-generate is 57 KB smaller, and GPT-2's prefill, decode and the
# char GPT's training step measured the same, paired). Kernels and the op front-ends stay at the
# build type's -O3.
# CUDA and sanitizer builds keep their usual link: their binaries are not the ones shipped small.
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=gold;LINKER:--icf=safe" WEFT_HAVE_GOLD_ICF)
if(NOT WEFT_HAVE_GOLD_ICF)
  message(STATUS "weft: gold with --icf not found; programs link without identical-code folding")
endif()

set(WEFT_COLD_SOURCES io/json.cpp io/safetensors_json.cpp io/safetensors.cpp io/checkpoint.cpp io/atomic_file.cpp
    models/hf_config.cpp models/tokenizer_json.cpp models/pretrained.cpp models/bnb_checkpoint.cpp models/gpt.cpp
    models/llama.cpp models/generate.cpp models/sampling.cpp models/text_stream.cpp nn/module.cpp
    nn/tied_state.cpp optim/lr_scheduler.cpp precision/quant/quant_state.cpp precision/bitsandbytes_precision.cpp
    precision/replace_layers.cpp tensor/print.cpp capi/weft_c.cpp)
list(TRANSFORM WEFT_COLD_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
if(CMAKE_BUILD_TYPE MATCHES "^(Release|MinSizeRel)$")
  set_property(SOURCE ${WEFT_COLD_SOURCES} APPEND PROPERTY COMPILE_OPTIONS -Os)
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
