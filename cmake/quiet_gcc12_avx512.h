// GCC 12's AVX-512 intrinsics header warns about its own code: _mm512_undefined_* initialise a
// variable from itself (`__m512 __Y = __Y;`), which -Wmaybe-uninitialized reports at every place
// where Eigen's AVX-512 packet code is inlined — hundreds of warnings in a build with
// WEFT_NATIVE on an AVX-512 machine (GCC bug 105593, fixed in GCC 13). CMakeLists.txt
// force-includes this file first in every unit for GCC < 13, so those header lines are read with
// the two warnings off; weft's own code keeps them.
#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
