// Private: the profile loader hands `[nic."GLOB"]` tables to the NIC module.
#pragma once

#include "mltune/nic.hpp"

#include <toml++/toml.h>

namespace mltune {

// Parses the `nic` table of one profile file into rules (appended to `out`).
// `display` names the file in errors.
Status parse_nic_table(const toml::table &nic, const std::string &display, std::vector<NicRule> &out);

} // namespace mltune
