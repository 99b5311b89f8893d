# Installs the weft build into a scratch prefix, then configures, builds and runs the consumer
# project against it, with the compiler weft was built with (CXX_COMPILER) and, when one is
# installed, with the other compiler family (g++ or clang++) too.
# Called by CTest with BUILD_DIR, SOURCE_DIR, WORK_DIR, CXX_COMPILER and OTHER_COMPILER set.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
# Configures, builds and runs the consumer with `compiler` in WORK_DIR/`dir`.
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
  execute_process(COMMAND ${WORK_DIR}/${dir}/consumer RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the consumer built with ${compiler} computed a wrong gradient: ${rc}")
  endif()
endfunction()

build_and_run_consumer(${CXX_COMPILER} build)
# weft runs its own thread pool, not OpenMP, so no compiler's runtime is baked into the library:
# a program compiled by the other compiler family links and runs against it as well.
if(OTHER_COMPILER)
  build_and_run_consumer(${OTHER_COMPILER} other)
endif()
