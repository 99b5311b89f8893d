# Installs the weft build into a scratch prefix, then configures, builds and runs the consumer
# project against it (find_package(weft COMPONENTS distributed)), with the compiler weft was built
# with (CXX_COMPILER) and, when one is installed, with the other compiler family (g++ or clang++)
# too; then builds the same two programs with nothing but the compiler and pkg-config (weft.pc,
# weft-distributed.pc), as a Makefile-based project would.
# Called by CTest with BUILD_DIR, SOURCE_DIR, WORK_DIR, CXX_COMPILER and OTHER_COMPILER set.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
# Runs the two programs in `dir`: the core one (exit 1: a wrong gradient; 2: Fabric's message for
# a missing weft_distributed is wrong; 3: no error at all) and the distributed one.
function(check_consumers dir how)
  execute_process(COMMAND ${dir}/consumer RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the core consumer ${how} failed: ${rc}")
  endif()
  execute_process(COMMAND ${dir}/consumer_distributed RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the distributed consumer ${how} failed: ${rc}")
  endif()
endfunction()

# Configures, builds and runs the consumers with `compiler` in WORK_DIR/`dir`.
function(build_and_run_consumer compiler dir)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/${dir} -G Ninja
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                          -DCMAKE_CXX_COMPILER=${compiler}
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "configuring the consumer with ${compiler} failed: ${rc}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${dir} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building the consumer with ${compiler} failed: ${rc}")
  endif()
  check_consumers(${WORK_DIR}/${dir} "built with ${compiler}")
endfunction()

build_and_run_consumer(${CXX_COMPILER} build)
# weft runs its own thread pool, not OpenMP, so no compiler's runtime is baked into the library:
# a program compiled by the other compiler family links and runs against it as well.
if(OTHER_COMPILER)
  build_and_run_consumer(${OTHER_COMPILER} other)
endif()

# pkg-config: the flags of weft.pc and weft-distributed.pc alone build and link the programs.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  file(GLOB pc_dirs ${WORK_DIR}/prefix/lib*/pkgconfig ${WORK_DIR}/prefix/lib/*/pkgconfig)
  string(REPLACE ";" ":" pc_path "${pc_dirs}")
  set(ENV{PKG_CONFIG_PATH} "${pc_path}")
  file(MAKE_DIRECTORY ${WORK_DIR}/pkgconfig)
  foreach(pair "consumer;main.cpp;weft" "consumer_distributed;main_distributed.cpp;weft-distributed")
    list(GET pair 0 program)
    list(GET pair 1 source)
    list(GET pair 2 package)
    execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${package} OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc)
      message(FATAL_ERROR "pkg-config --cflags --libs ${package} failed: ${rc}")
    endif()
    separate_arguments(flags UNIX_COMMAND "${flags}")
    execute_process(COMMAND ${CXX_COMPILER} -std=c++20 -O1 ${SOURCE_DIR}/${source} ${flags}
                            -o ${WORK_DIR}/pkgconfig/${program} RESULT_VARIABLE rc)
    if(rc)
      message(FATAL_ERROR "building ${program} with pkg-config's flags for ${package} failed: ${rc}")
    endif()
  endforeach()
  check_consumers(${WORK_DIR}/pkgconfig "built with pkg-config's flags")
else()
  message(WARNING "pkg-config is not installed: the pkg-config build of the consumers is not checked")
endif()
