# pkg-config files for the installed package: weft.pc (the core library) and, when built,
# weft-distributed.pc (which requires weft and adds weft_distributed and Gloo). They locate the
# prefix from their own folder (${pcfiledir}), so an installed tree may be moved.
#   c++ -std=c++20 app.cpp $(pkg-config --cflags --libs weft)
#   c++ -std=c++20 app.cpp $(pkg-config --cflags --libs weft-distributed)
file(RELATIVE_PATH weft_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(weft_pc_prefix "\${pcfiledir}/${weft_pc_to_prefix}")
# What the static libraries need beside them.
set(weft_pc_libs "-pthread")
if(WEFT_CUDA)
  string(APPEND weft_pc_libs " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt")
endif()
if(WEFT_OPENBLAS_INCLUDE_DIR AND WEFT_OPENBLAS_LIBRARY AND WEFT_OPENBLAS)
  string(APPEND weft_pc_libs " ${WEFT_OPENBLAS_LIBRARY}")
endif()
set(weft_pc_common "prefix=${weft_pc_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}/weft
")
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/weft.pc CONTENT "${weft_pc_common}
Name: weft
Description: weft tensor engine, core library (tensor, nn, optim, io, precision, models, Fabric)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir} -pthread
Libs: -L\${libdir} -lweft ${weft_pc_libs}
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(WEFT_DISTRIBUTED)
  # The anchor makes the linker take the registration of Fabric's ddp and fsdp strategies
  # (Note [Strategy table] in fabric/strategy.h).
  set(weft_pc_distributed_libs "$<TARGET_LINKER_FILE:gloo>")
  if(WEFT_CUDA)
    string(APPEND weft_pc_distributed_libs " ${WEFT_NCCL_LIBRARY}")
  endif()
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/weft-distributed.pc CONTENT "${weft_pc_common}
Name: weft-distributed
Description: weft's distributed library: process groups on Gloo, DDP, FSDP, Fabric's ddp and fsdp strategies
Version: ${PROJECT_VERSION}
Requires: weft = ${PROJECT_VERSION}
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,--undefined=weft_distributed_strategies_anchor -lweft_distributed ${weft_pc_distributed_libs}
")
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weft-distributed.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
