// The phases of policy_fields (sched/rules.cpp), one function each, so unit
// tests can exercise every phase on a TOML table: the policy, the numeric
// fields, the keys a policy allows, its booleans, and the DEADLINE, FIFO/RR
// and other-policy attributes.  Library-private: not part of the installed API.
#pragma once

#include "mltune/sched.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace mltune::detail {

// A [[sched.rule]] table or its fallback, with what names it in errors.
struct PolicyTable {
  const toml::table &t;
  const std::string &display; // file name
  const std::string &ctx;     // rule (and "fallback")
};

// The numeric fields as written (-1: absent; nice 0 when absent).
struct PolicyNumbers {
  int64_t prio = -1;
  int64_t nice = 0;
  int64_t runtime = -1;
  int64_t deadline = -1;
  int64_t period = -1;
};

// policy = deadline, fifo, rr or other (no deadline for a fallback).
Result<SchedPolicy> parse_policy(const PolicyTable &pt, bool fallback);

// priority, nice, runtime_us, deadline_us and period_us, each in its range.
Result<PolicyNumbers> policy_numbers(const PolicyTable &pt);

// None of the policy keys but `allowed` is present (`policy` names the policy in errors).
Status only_keys(const PolicyTable &pt, const std::string &policy, std::initializer_list<const char *> allowed);

// A boolean field, `dflt` when absent.
Result<bool> policy_bool(const PolicyTable &pt, const char *key, bool dflt);

// runtime <= deadline <= period in ns, reset_on_fork (default on) and overrun_signal.
Status deadline_fields(const PolicyTable &pt, const std::string &policy, PolicyNumbers n, SchedAttr &a);

// fifo/rr: priority (required) and reset_on_fork (default on).
Status priority_fields(const PolicyTable &pt, const std::string &policy, const PolicyNumbers &n, SchedAttr &a);

// other: nice and reset_on_fork (default off).
Status nice_fields(const PolicyTable &pt, const std::string &policy, const PolicyNumbers &n, SchedAttr &a);

// Policy fields of a rule or a fallback table: every phase above.
Status policy_fields(const toml::table &t, const std::string &display, const std::string &ctx, SchedAttr &a,
                     bool fallback);

} // namespace mltune::detail
