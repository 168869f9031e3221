// Opening a path below a directory as if that directory were "/": the one
// mechanism by which a Sysroot other than the live root confines every path
// to its tree.
//
// A path is resolved component by component inside the tree: ".." at the
// top stays at the top, an absolute symlink starts again at the top of the
// tree, a relative one from the directory that holds it, so the tree's
// symlinks resolve as they would on the node whose root it is, and nothing
// outside is ever reached.  openat2(2) with RESOLVE_IN_ROOT does this in the
// kernel (Linux 5.6+); on kernels without it, walk() does the same in user
// space, one component at a time, each opened with O_PATH|O_NOFOLLOW
// relative to the descriptor of the one before (no path is ever looked up
// from the host's root, so a component swapped for a symlink meanwhile is
// seen, not followed).
#pragma once

#include "base/unique_fd.hpp"

#include <string>
#include <string_view>
#include <sys/types.h>

namespace mltune::detail {

// openat(2) of `rel` (relative to the tree, no leading '/' needed) below the
// directory `top` with `flags` (O_CLOEXEC is added) and `mode`, resolved
// inside it; -1 with errno set on failure.  O_NOFOLLOW refuses a final
// symlink (ELOOP), as it does for open(2).  Magic links (/proc/PID/fd/N and
// the like) are not followed (ELOOP).
int open_beneath(int top, std::string_view rel, int flags, mode_t mode = 0);

// The tree path ("/a/b/c", no symlink in it) that `rel` resolves to below
// `top`; empty with errno set when a component does not exist. `top_path`:
// fd_path(top) as read when the tree was opened, which saves reading it again
// (read anew where the tree has moved since).
std::string resolve_beneath(int top, std::string_view rel, std::string_view top_path = {});

// The path the kernel shows for an open descriptor (/proc/self/fd/N), ""
// where /proc cannot show it or the file is gone.
std::string fd_path(int fd);

// Test hook: resolve in user space even where openat2(2) exists, so that
// the tests cover the path older kernels take.
void force_user_space_walk(bool force);

} // namespace mltune::detail
