// Comparing a node (through a Sysroot) with a profile, and profiles with each other.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/profile.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <vector>

namespace mltune {

enum class KnobState {
  match,      // the current value satisfies the knob (Knob::satisfied_by)
  differs,    // it does not
  missing,    // the knob's file does not exist on this node
  unreadable, // exists but could not be read
  not_read,   // left unread: reading it interrupts a CPU compare() was asked to spare
};
std::string_view to_string(KnobState s);

struct KnobStatus {
  const Knob *knob = nullptr;
  std::string current; // normalised; empty unless readable
  KnobState state = KnobState::match;
  std::string error; // for unreadable
  // A difference that makes the node not match (required knob not matching).
  // Whether the node lacking or refusing the value is allowed (never a difference).
  [[nodiscard]] bool allowed() const {
    return knob->optional || state == KnobState::not_read || (knob->if_present && state == KnobState::missing);
  }
  [[nodiscard]] bool counts() const { return state != KnobState::match && !allowed(); }
};

// `spare`: CPUs not to interrupt (quiet_cpus(): feeder cores, boot-isolated
// CPUs); a knob read on one of them (Knob::read_on_cpu) is not read and is
// KnobState::not_read.  A switch reads everything; verify, metrics and
// conformance, which run again and again, spare them.
std::vector<KnobStatus> compare(const Profile &profile, const Sysroot &root, const CpuSet *spare = nullptr);
// True when the value read from the node equals the wanted value exactly.
bool values_equal(std::string_view current, std::string_view wanted);

// Every setting of a profile in every domain, flat: the knobs (value as
// Knob::wanted()), [cpu] keys, each [block."GLOB"] setting as "GLOB KEY",
// each [nic."GLOB"] setting as "GLOB KEY" (the last table that sets it),
// each [[sched.rule]] by name, described.  In profile order.
struct ProfileSetting {
  std::string domain; // "knobs", "cpu", "block", "nic", "sched"
  std::string key;
  std::string value;
  std::string origin; // file:line
};
std::vector<ProfileSetting> profile_settings(const Profile &p);

// The profile's content as one short hash (8 hex digits, FNV-1a 64 folded to
// 32 bits): its name, every setting of every domain (domain, key, value;
// not where it was written) and its modules.  Two nodes on the same profile
// content have the same fingerprint; an edited profile has another.
std::string profile_fingerprint(const Profile &p);

struct ProfileDiffEntry {
  std::string key;
  std::string a; // empty when only in b
  std::string b; // empty when only in a
  std::string domain = "knobs";
};
// Every setting (profile_settings) that differs or that one profile lacks.
std::vector<ProfileDiffEntry> diff_profiles(const Profile &a, const Profile &b);

} // namespace mltune
