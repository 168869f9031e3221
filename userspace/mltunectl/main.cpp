#include "cli.hpp"

#include <cstdlib>
#include <iostream>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // switch and off go to the resident service (mltunectl serve) when one runs.
  if (auto rc = mltune::cli::forward(args, std::cerr)) {
    std::_Exit(*rc); // nothing of this process to clean up: the service did the work
  }
  return mltune::cli::run(args, std::cout, std::cerr);
}
