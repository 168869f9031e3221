// The record of the profile a switch made active (mltune/node.hpp): which
// file it came from, so that every later check reads that file.
#include "base/state_file.hpp"
#include "mltune/compare.hpp"
#include "mltune/node.hpp"

#include <nlohmann/json.hpp>

namespace mltune {

void to_json(nlohmann::json &j, const ProfileRecord &r);
void from_json(const nlohmann::json &j, ProfileRecord &r);

void to_json(nlohmann::json &j, const ProfileRecord &r) {
  j = {{"name", r.name}, {"file", r.file}, {"fingerprint", r.fingerprint}};
}

void from_json(const nlohmann::json &j, ProfileRecord &r) {
  r.name = j.at("name").get<std::string>();
  r.file = j.at("file").get<std::string>();
  r.fingerprint = j.at("fingerprint").get<std::string>();
}

namespace {

constexpr StateFile<ProfileRecord> k_record{k_profile_record, 1, false};

} // namespace

Status record_profile(const Sysroot &root, const Profile &p) {
  return k_record.save(root, ProfileRecord{p.name, p.file, profile_fingerprint(p)});
}

Status forget_profile(const Sysroot &root) {
  return k_record.remove(root);
}

Result<std::optional<ProfileRecord>> recorded_profile(const Sysroot &root) {
  return k_record.load(root);
}

Result<Profile> load_active_profile(const Sysroot &root, std::string_view name) {
  const ProfileLoader loader(&root);
  auto rec = k_record.load(root);
  if (!rec) {
    return rec.error();
  }
  if (!*rec || (*rec)->name != name || (*rec)->file.empty()) {
    return loader.load(name);
  }
  const ProfileRecord &r = **rec;
  // The file is read on this machine, as the switch read it (a path given
  // on the command line is a host path).
  auto p = ProfileLoader(&root).load(r.file);
  if (!p) {
    return failure("profile '" + r.name + "' was switched from " + r.file +
                   ", which no longer loads: " + p.error().message);
  }
  if (profile_fingerprint(*p) != r.fingerprint) {
    return failure("profile '" + r.name + "' was switched from " + r.file +
                   ", which has changed since: switch to it again to apply the change");
  }
  return p;
}

} // namespace mltune
