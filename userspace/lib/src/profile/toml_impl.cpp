// The one translation unit that compiles toml++'s implementation (the rest of
// libmltune includes it with TOML_HEADER_ONLY=0), so the binary needs no
// libtomlplusplus.so and fuzzing instruments the parser too.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
