// Descriptors below a Sysroot, for code in libmltune that needs more than
// Sysroot's whole-file calls (a directory scan, a lock, a seq file read in
// pieces).  Every open goes through open_node(), so that below a tree it
// resolves inside the tree (base/beneath.hpp).
#pragma once

#include "base/unique_fd.hpp"
#include "mltune/sysroot.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace mltune::detail {

// open(2) of the node path `abs` with `flags` (O_CLOEXEC added): the live
// root's own path, or resolved inside the tree.  Invalid, errno set, on
// failure.
UniqueFd open_node(const Sysroot &root, std::string_view abs, int flags, mode_t mode = 0);

// Calls f(line) (without its newline) for each line of the node file `abs`,
// read in pieces (for files past Sysroot::read()'s 1 MiB: /proc/kallsyms,
// /proc/interrupts on a large machine) until f returns false.  False when
// the file cannot be opened or read.
bool for_each_line(const Sysroot &root, std::string_view abs, const std::function<bool(std::string_view)> &f);

// Test hooks of Sysroot::write_file(): where the temporary file's names come
// from (nullptr: random names), and whether O_TMPFILE is tried first.
void set_temp_names(std::function<std::string(std::string_view target)> names);
void use_tmpfile(bool use);

} // namespace mltune::detail
