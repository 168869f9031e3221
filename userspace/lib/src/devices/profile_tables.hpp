// Private: the profile loader hands the [cpu] table and the [block."GLOB"]
// tables to the device-settings module (device_knobs.hpp).
#pragma once

#include "mltune/device_knobs.hpp"

#include <toml++/toml.h>

namespace mltune::detail {

// [cpu] of one file: each key replaces an earlier file's in place.
Status parse_cpu_table(const toml::table &cpu, const std::string &display, std::vector<DeviceSetting> &out);
// [block."GLOB"] tables of one file, in file order, appended.
Status parse_block_tables(const toml::table &block, const std::string &display, std::vector<BlockRule> &out);

} // namespace mltune::detail
