// The phases of ProfileLoader::load_into (profile/profile.cpp), one function
// each, so unit tests can exercise every phase on TOML text: parsing, the
// top-level schema, the include checks, the [sysctl]/[sysfs] knobs and their
// merge, and the [nic], [sched] and description sections.  Library-private:
// not part of the installed API.
#pragma once

#include "base/unique_fd.hpp"
#include "mltune/profile.hpp"
#include "mltune/sysroot.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune::detail {

// An include reference and where it was written.
using IncludeRef = std::pair<std::string, toml::source_region>;

// A knob and the line it was written on.
struct KnobEntry {
  Knob knob;
  uint32_t line;
};

// A profile file (or another TOML file of mltune, such as the node
// configuration): a regular file of at most k_max_profile_bytes, read whole.
Result<std::string> read_profile_file(const std::filesystem::path &p);
// The same for a node path below `root`, opened inside it.
Result<std::string> read_profile_file(const Sysroot &root, std::string_view abs);
// The same for a file opened already (invalid: the open's errno), named `p`.
Result<std::string> read_profile_fd(const UniqueFd &fd, const std::filesystem::path &p);

// The TOML document of a profile: ASCII only, parse errors as display:line:column.
Result<toml::table> parse_profile_text(const std::string &text, const std::string &display);

// "t.toml:12": a file and the line a key or value starts on, for errors.
std::string where(const std::string &display, const toml::source_region &r);

// One top-level table of the profile format (profile/sections.cpp): its
// key, how errors name it, the TOML type it must have (none: its parser
// checks), and the parser that merges it into a Profile (null for the
// knobs, which pass 3 reads first).
struct ProfileSection {
  std::string_view key;        // "hugepages"
  std::string_view name;       // "[hugepages]"
  toml::node_type type;        // table, array or none
  std::string_view wrong_type; // "[hugepages] must be a table"
  Status (*merge)(const toml::node &v, const std::string &display, Profile &out);
};

// The registry, in merge order: every top-level key besides description and
// include.
std::span<const ProfileSection> profile_sections();

// A [hugepages] table ("SIZE" = { NODE = PAGES, ... }) merged into `out`:
// a later value for a size and node replaces the earlier one.  Profiles and
// the node configuration read it alike.
Status merge_hugepages(const toml::table &t, const std::string &display, std::vector<HugePageSetting> &out);

// Pass 1: the top-level keys are known and of the right type; the includes, in order.
Result<std::vector<IncludeRef>> check_top_level(const toml::table &doc, const std::string &display);

// Pass 2 check: including `id` from the files in `stack` is neither a cycle nor too deep.
Status check_include(const std::vector<std::string> &stack, const std::string &id, const std::string &at);

// One knob: key `k` of [sysctl] or [sysfs] with its { value, optional, reason } table.
Result<Knob> parse_knob(KnobKind kind, const toml::key &k, const toml::node &v, const std::string &display);

// Pass 3: every knob of [sysctl] and [sysfs], in file order.
Result<std::vector<KnobEntry>> parse_knobs(const toml::table &doc, const std::string &display);

// The knobs into `out`: a knob replaces the one with the same key, others are appended.
void merge_knobs(std::vector<KnobEntry> entries, Profile &out);

// A kernel module name as profiles and the node configuration's module
// allowlist take it: 1-63 of [A-Za-z0-9_-].
bool valid_module_name(std::string_view name);

// modules = [...] into `out` (a later entry for a name replaces it in place).
Status merge_modules(const toml::array &arr, const std::string &display, Profile &out);

// [cpu] of one file: each key replaces an earlier file's in place
// (profile/device_tables.cpp).
Status parse_cpu_table(const toml::table &cpu, const std::string &display, std::vector<DeviceSetting> &out);
// [block."GLOB"] tables of one file, in file order, appended.
Status parse_block_tables(const toml::table &block, const std::string &display, std::vector<BlockRule> &out);

// Every registered section of `doc` but the knobs, in registry order, and
// the description, into `out`.
Status merge_sections(const toml::table &doc, const std::string &display, Profile &out);

} // namespace mltune::detail
