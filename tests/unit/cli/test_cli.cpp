// Every mltunectl subcommand, end to end on a fake sysroot.
#include "fake_sysroot.hpp"

#include "base/baseline.hpp"
#include "cli.hpp"
#include "mltune/compare.hpp"
#include "mltune/metrics.hpp"
#include "mltune/switch.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

using mltune::test::FakeSysroot;
using json = nlohmann::json;

namespace {

class Cli : public ::testing::Test {
protected:
  struct Out {
    int rc;
    std::string out, err;
    [[nodiscard]] json j() const { return json::parse(out); }
  };
  Out run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--sysroot", fake.dir().string()});
    std::ostringstream o;
    std::ostringstream e;
    const int rc = mltune::cli::run(args, o, e);
    return {rc, o.str(), e.str()};
  }
  std::string profile_file(const std::string &name, const std::string &text) {
    fake.set("/p/" + name, text);
    return (fake.dir() / "p" / name).string();
  }
  FakeSysroot fake;
};

} // namespace

TEST_F(Cli, UsageErrorsExit2) {
  EXPECT_EQ(run({}).rc, 2);
  EXPECT_EQ(run({"frobnicate"}).rc, 2);
  EXPECT_EQ(run({"switch"}).rc, 2);
  EXPECT_EQ(run({"switch", "training", "--backend", "magic"}).rc, 2);
  EXPECT_EQ(run({"profile"}).rc, 2);
}

// Parse errors take the one error path: "mltunectl: error: ...", a JSON
// error document with --json, exit 2, and the words the user typed.
TEST_F(Cli, ParseErrorsInTheDocumentedFormat) {
  const auto unknown = run({"frobnicate"});
  EXPECT_EQ(unknown.err.rfind("mltunectl: error: unknown command 'frobnicate' (one of: profile, ", 0), 0U)
      << unknown.err;
  EXPECT_NE(unknown.err.find("Run 'mltunectl --help' for usage."), std::string::npos) << unknown.err;
  const auto none = run({});
  EXPECT_EQ(none.err.rfind("mltunectl: error: a command is required (one of: ", 0), 0U) << none.err;
  const auto bad = run({"--json", "switch", "-b", "bogus", "training"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err.rfind("mltunectl: error: --backend: bogus not in {auto,kernel,direct}", 0), 0U) << bad.err;
  EXPECT_NE(bad.err.find("Run 'mltunectl switch --help' for usage."), std::string::npos) << bad.err;
  ASSERT_NO_THROW((void)bad.j()) << bad.out;
  EXPECT_EQ(bad.j()["error"]["exit_code"], 2);
  EXPECT_NE(bad.j()["error"]["message"].get<std::string>().find("--backend"), std::string::npos);
  // --json after the command, where the error stops parsing before it.
  const auto late = run({"noise", "--top", "-1", "--json"});
  EXPECT_EQ(late.rc, 2);
  ASSERT_NO_THROW((void)late.j()) << late.out;
  EXPECT_NE(late.j()["error"]["message"].get<std::string>().find("--top"), std::string::npos);
}

// --cpus names CPUs of this node, or is refused before anything runs; an
// empty list is not "all".
TEST_F(Cli, CpusAreCheckedAgainstTheNode) {
  fake.set("/sys/devices/system/cpu/online", "0-1\n");
  const auto off = run({"noise", "--cpus", "5", "--duration", "0.1", "--probe", "proc"});
  EXPECT_EQ(off.rc, 2);
  EXPECT_NE(off.err.find("--cpus 5: CPU 5 is not online on this node (online: 0-1)"), std::string::npos) << off.err;
  const auto empty = run({"noise", "--cpus", ""});
  EXPECT_EQ(empty.rc, 2);
  EXPECT_NE(empty.err.find("--cpus: empty value (omit --cpus for all CPUs)"), std::string::npos) << empty.err;
  EXPECT_EQ(run({"noise", "--top", "-1"}).rc, 2);
  const auto feeder = run({"--dry-run", "feeder", "on", "--cpus", "1-3"});
  EXPECT_EQ(feeder.rc, 2);
  EXPECT_NE(feeder.err.find("CPUs 2-3 are not online"), std::string::npos) << feeder.err;
}

// Every subcommand's help lists the global options; --version names the
// build, the module ABI and the loaded module.
TEST_F(Cli, HelpListsGlobalOptionsAndVersionNamesTheAbi) {
  for (const auto &args : std::vector<std::vector<std::string>>{{"switch", "--help"}, {"nic", "rings", "--help"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.rc, 0);
    EXPECT_NE(r.out.find("Global options (before or after the command):"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--sysroot DIR"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << r.out;
  }
  const auto none = run({"--version"});
  EXPECT_EQ(none.rc, 0);
  EXPECT_NE(none.out.find("module ABI "), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("module: not loaded"), std::string::npos) << none.out;
  fake.set("/sys/kernel/mltune/version", "0.1.0 abi 1\n");
  EXPECT_NE(run({"--version"}).out.find("module: 0.1.0 abi 1"), std::string::npos);
  // `[global options] --version` is answered before the parser; any other
  // form by the parser, with the same text.
  const auto parsed = run({"--version", "topology"});
  EXPECT_EQ(parsed.rc, 0);
  EXPECT_EQ(parsed.out, run({"--json", "--version"}).out);
  EXPECT_EQ(parsed.out, run({"--version"}).out);
}

TEST_F(Cli, HelpForEveryCommand) {
  for (const auto &args : std::vector<std::vector<std::string>>{{"--help"},
                                                                {"profile", "--help"},
                                                                {"profile", "list", "--help"},
                                                                {"profile", "show", "--help"},
                                                                {"profile", "check", "--help"},
                                                                {"audit", "--help"},
                                                                {"verify", "--help"},
                                                                {"diff", "--help"},
                                                                {"switch", "--help"},
                                                                {"persist", "--help"},
                                                                {"config", "--help"},
                                                                {"config", "apply", "--help"},
                                                                {"pool", "quota", "--help"},
                                                                {"exec", "--help"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.rc, 0) << args[0];
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << args[0];
  }
}

// Only the subcommand named on the command line is registered (start-up
// cost); every name the top-level help lists must still be reachable.
TEST_F(Cli, EverySubcommandInTheHelpIsRegistered) {
  const auto top = run({"--help"});
  ASSERT_EQ(top.rc, 0);
  const auto from = top.out.find("Subcommands:");
  ASSERT_NE(from, std::string::npos);
  std::istringstream lines(top.out.substr(from));
  std::string line;
  std::getline(lines, line);
  int seen = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) {
      continue;
    }
    if (name.ends_with(",")) { // "active, status": a name and its aliases
      name.pop_back();
    }
    const auto r = run({name, "--help"});
    EXPECT_EQ(r.rc, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("Usage: mltunectl " + name), std::string::npos) << name << ":\n" << r.out;
    ++seen;
  }
  EXPECT_GE(seen, 13);
  // Global options before the subcommand, and its value, are skipped.
  EXPECT_EQ(run({"--json", "-v", "diff", "training", "training"}).rc, 0);
}

// The service serves the live node only: with a fixture root (every run()
// here passes --sysroot) it refuses to start, touching no socket.
TEST_F(Cli, ServeRefusesASysroot) {
  const std::string sock = (fake.dir() / "s.sock").string();
  ::setenv("MLTUNE_SOCKET", sock.c_str(), 1);
  const auto r = run({"serve"});
  ::unsetenv("MLTUNE_SOCKET");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--sysroot"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(sock));
}

TEST_F(Cli, ProfileListShowCheck) {
  auto r = run({"--json", "profile", "list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["profiles"].size(), 3U);
  r = run({"profile", "show", "inference"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("vm.swappiness = 0  # inference.toml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("net.core.rmem_max >= 134217728  # base.toml:"), std::string::npos);
  r = run({"--json", "profile", "show", "training"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.j()["knobs"][0]["origin"].get<std::string>().substr(0, 10), "base.toml:");
  const auto good =
      profile_file("good.toml", "include = [\"training\"]\n[sysctl]\n\"vm.swappiness\" = { value = 3 }\n");
  r = run({"profile", "check", good});
  EXPECT_EQ(r.rc, 0) << r.err;
  const auto bad = profile_file("bad.toml", "[sysctl]\n\"vm.swappiness\" = { value = 999 }\n");
  r = run({"profile", "check", bad});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("bad.toml:2: vm.swappiness: 999 is out of range"), std::string::npos) << r.err;
  r = run({"--json", "profile", "check", bad});
  EXPECT_EQ(r.j()["error"]["exit_code"], 2);
}

TEST_F(Cli, VerifySwitchVerifyBaseline) {
  const auto before = fake.snapshot();
  auto r = run({"--json", "verify", "training"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(r.j()["match"].get<bool>());
  EXPECT_GT(r.j()["differences"].size(), 10U);

  r = run({"--dry-run", "switch", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("write\tvm.swappiness: '60' -> '1'"), std::string::npos) << r.out;
  EXPECT_EQ(fake.snapshot(), before);

  r = run({"--json", "switch", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["backend"], "direct");
  EXPECT_EQ(run({"verify", "training"}).rc, 0);
  EXPECT_EQ(run({"verify", "inference"}).rc, 1);

  // The dry run goes through the same path as the switch: every domain
  // says what it would restore, nothing is written.
  const auto switched = fake.snapshot();
  r = run({"--dry-run", "--json", "switch", "baseline"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto plan = r.j();
  bool swappiness = false;
  for (const auto &s : plan["steps"]) {
    if (s["key"] == "/proc/sys/vm/swappiness") {
      swappiness = s["action"] == "write" && s["current"] == "1" && s["value"] == "60";
    }
  }
  EXPECT_TRUE(swappiness) << plan.dump();
  std::string domains;
  for (const auto &d : plan["domains"]) {
    domains += d["domain"].get<std::string>() + "=" + d["state"].get<std::string>() + " ";
  }
  EXPECT_EQ(domains, "hugepages=off sched=unchecked nic=off knobs=planned modules=off ");
  EXPECT_EQ(fake.snapshot(), switched);
  r = run({"--dry-run", "switch", "baseline"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("write\t/proc/sys/vm/swappiness: '1' -> '60'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nic"), std::string::npos) << r.out;
  EXPECT_EQ(fake.snapshot(), switched);
  r = run({"switch", "baseline"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(fake.snapshot(), before);
}

// The whole node: verify lists every domain, active and off work on a tree,
// the domains a tree cannot reach are "unchecked", never a silent match.
TEST_F(Cli, ActiveVerifyOff) {
  const auto before = fake.snapshot();
  auto r = run({"--json", "active"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.j()["profile"].is_null());
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  r = run({"--json", "status"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["profile"], "training");
  r = run({"--json", "verify", "training"});
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string domains;
  const auto verified = r.j();
  for (const auto &d : verified["domains"]) {
    domains += d["domain"].get<std::string>() + "=" + d["state"].get<std::string>() + " ";
  }
  EXPECT_EQ(domains, "modules=match knobs=match nic=unchecked sched=unchecked hugepages=not-applicable ");
  r = run({"--json", "off"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(r.j()["ok"].get<bool>());
  EXPECT_EQ(fake.snapshot(), before);
  EXPECT_FALSE(fake.root().exists(mltune::k_baseline_file));
}

// --field NAME: one field of the --json document alone, for scripts (the
// Slurm prolog reads the active profile so): text without --json (null as
// an empty line), JSON with it; an unknown field is a usage error.
TEST_F(Cli, FieldPrintsOneFieldOfTheDocument) {
  auto r = run({"active", "--field", "profile"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "\n") << "no profile: an empty line";
  r = run({"--json", "active", "--field", "profile"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "null\n");
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  r = run({"active", "--field", "profile"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "training\n");
  EXPECT_EQ(run({"--json", "status", "--field", "profile"}).out, "\"training\"\n");
  EXPECT_EQ(run({"active", "--field", "backend"}).out, "direct\n");
  EXPECT_EQ(run({"active", "--field", "in_line"}).out, "true\n");
  const auto conf = run({"conformance"});
  ASSERT_EQ(conf.rc, 0);
  EXPECT_EQ(run({"active", "--field", "conformance"}).out, conf.out);
  r = run({"active", "--field", "domains"});
  EXPECT_EQ(r.rc, 2) << "only the scalar fields";
  EXPECT_TRUE(r.out.empty());

  EXPECT_EQ(run({"config", "show", "--field", "profile"}).rc, 2) << "no configuration";
  fake.set("/etc/mltune/mltune.toml", "profile = \"inference\"\n[modules]\nallow = [\"tcp_bbr\"]\n");
  r = run({"config", "show", "--field", "profile"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "inference\n");
  EXPECT_EQ(run({"config", "show", "--field", "feeder_cpus"}).out, "\n");
  r = run({"--json", "config", "show"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["module_allow"], json::array({"tcp_bbr"}));
  EXPECT_NE(run({"config", "show"}).out.find("modules allowed: tcp_bbr\n"), std::string::npos);
}

// metrics: the exposition format for the textfile collector, one 0/1
// series per domain and state, following the switch; --output replaces a
// .prom file of the tree and refuses anything else.
TEST_F(Cli, MetricsFollowTheSwitch) {
  auto r = run({"metrics"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("# TYPE mltune_domain_state gauge\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmltune_in_line 0\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nmltune_profile_active{"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmltune_domain_state{domain=\"knobs\",state=\"off\"} 1\n"), std::string::npos);
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  // The textfile directory is node_exporter's: a missing one is an error,
  // not made.
  r = run({"metrics", "--output", "/var/lib/prometheus/node-exporter/mltune.prom"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/var/lib/prometheus/node-exporter: open directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fake.root().exists("/var/lib/prometheus"));
  std::filesystem::create_directories(fake.dir() / "var/lib/prometheus/node-exporter");
  ASSERT_EQ(run({"metrics", "--output", "/var/lib/prometheus/node-exporter/mltune.prom"}).rc, 0);
  auto file = fake.root().read("/var/lib/prometheus/node-exporter/mltune.prom");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_NE(file->find("\nmltune_profile_active{profile=\"training\",backend=\"direct\"} 1\n"), std::string::npos)
      << *file;
  EXPECT_NE(file->find("\nmltune_domain_state{domain=\"knobs\",state=\"applied\"} 1\n"), std::string::npos);
  EXPECT_NE(file->find("\nmltune_domain_state{domain=\"knobs\",state=\"off\"} 0\n"), std::string::npos);
  EXPECT_NE(file->find("\nmltune_differences{domain=\"knobs\"} 0\n"), std::string::npos);
  EXPECT_NE(file->find("\nmltune_in_line 1\n"), std::string::npos) << *file;
  r = run({"--json", "metrics"});
  ASSERT_EQ(r.rc, 0) << r.err;
  bool active = false;
  const auto samples = r.j()["samples"];
  for (const auto &smp : samples) {
    active |= smp["name"] == "mltune_profile_active" && smp["labels"]["profile"] == "training" && smp["value"] == 1;
  }
  EXPECT_TRUE(active) << r.out;
  for (const char *bad : {"mltune.prom", "/var/lib/prometheus/node-exporter/mltune.txt"}) {
    r = run({"metrics", "-o", bad});
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_NE(r.err.find(".prom"), std::string::npos) << r.err;
  }
  ASSERT_EQ(run({"off"}).rc, 0);
}

// --dry-run switch: the plan's header first; a bound the node meets shows
// as met, not as a change to the bound.
TEST_F(Cli, DryRunSwitchShowsBoundsAsBounds) {
  const auto r = run({"--dry-run", "switch", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("plan: switch to 'training' with the direct backend\n", 0), 0U) << r.out;
  EXPECT_NE(r.out.find("unchanged\tfs.file-max: '9223372036854775807' (meets >= 2097152)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("write\tvm.swappiness: '60' -> '1'\n"), std::string::npos) << r.out;
}

// A profile switched by path is the file it came from: active, verify,
// metrics and conformance check that file (never a built-in of the same
// name) and agree with each other through a change of it.
TEST_F(Cli, ProfileSwitchedByPathIsTrackedThroughAChangeOfItsFile) {
  const auto state = [&] {
    auto a = run({"--json", "active"});
    const auto c = run({"conformance"});
    const auto m = run({"metrics"});
    const bool in_line = a.j()["in_line"].get<bool>();
    EXPECT_EQ(c.rc, in_line ? 0 : 1) << c.out << c.err;
    EXPECT_EQ(a.j()["conformance"].is_null(), !in_line) << a.out;
    EXPECT_NE(m.out.find(in_line ? "\nmltune_in_line 1\n" : "\nmltune_in_line 0\n"), std::string::npos) << m.out;
    return a;
  };
  const auto f = profile_file("gpunode.toml", "[sysctl]\n\"vm.swappiness\" = { value = 5 }\n");
  ASSERT_EQ(run({"switch", f}).rc, 0);
  auto a = state();
  EXPECT_EQ(a.j()["profile"], "gpunode");
  EXPECT_TRUE(a.j()["in_line"].get<bool>()) << a.out;
  EXPECT_EQ(run({"verify", "gpunode"}).rc, 0);
  // The file changes: every check says so, none is in line.
  fake.set("/p/gpunode.toml", "[sysctl]\n\"vm.swappiness\" = { value = 6 }\n");
  a = state();
  EXPECT_FALSE(a.j()["in_line"].get<bool>()) << a.out;
  EXPECT_NE(a.out.find("has changed since: switch to it again"), std::string::npos) << a.out;
  auto v = run({"verify", "gpunode"});
  EXPECT_EQ(v.rc, 1);
  EXPECT_NE(v.err.find("was switched from " + f + ", which has changed since"), std::string::npos) << v.err;
  // conformance gives the reason, not an empty one.
  const auto c = run({"conformance"});
  EXPECT_NE(c.err.find("the node is not in line with 'gpunode' (profile 'gpunode': "), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("has changed since"), std::string::npos) << c.err;
  // Gone: the same, named.
  std::filesystem::remove(f);
  a = state();
  EXPECT_NE(a.out.find("which no longer loads"), std::string::npos) << a.out;
  EXPECT_EQ(run({"verify", "gpunode"}).rc, 1);
  // Switched again: in line with the new content.
  fake.set("/p/gpunode.toml", "[sysctl]\n\"vm.swappiness\" = { value = 6 }\n");
  ASSERT_EQ(run({"switch", f}).rc, 0);
  EXPECT_TRUE(state().j()["in_line"].get<bool>());
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "6");
  // A file named like a built-in is that file, not the built-in.
  const auto t = profile_file("pp/training.toml", "[sysctl]\n\"vm.swappiness\" = { value = 7 }\n");
  ASSERT_EQ(run({"switch", t}).rc, 0);
  a = state();
  EXPECT_EQ(a.j()["profile"], "training");
  EXPECT_TRUE(a.j()["in_line"].get<bool>()) << a.out;
  EXPECT_EQ(run({"verify", "training"}).rc, 0);
  // By name again: the built-in, and the record says so.
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  EXPECT_TRUE(state().j()["in_line"].get<bool>());
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "1");
  // One name rule, at switch time: nothing is written.
  const auto odd = profile_file("My.Profile.toml", "[sysctl]\n\"vm.swappiness\" = { value = 5 }\n");
  const auto before = fake.snapshot();
  const auto r = run({"switch", odd});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("its name 'My.Profile' (the file name without .toml) is not a profile name"), std::string::npos)
      << r.err;
  EXPECT_EQ(fake.snapshot(), before);
  ASSERT_EQ(run({"off"}).rc, 0);
  EXPECT_FALSE(fake.root().exists("/run/mltune/profile.json"));
}

// conformance: the profile's content hash while the node is in line, the
// same in metrics and active --json; exit 1 with the reason once a knob
// drifted or no profile is active. Only content counts, not its origin.
TEST_F(Cli, ConformanceIsTheHashWhileInLine) {
  auto r = run({"conformance"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no profile is active"), std::string::npos) << r.err;
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  r = run({"conformance"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(r.out.size(), 9U) << r.out;
  const std::string hash = r.out.substr(0, 8);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos) << hash;
  r = run({"--json", "active"});
  EXPECT_EQ(r.j()["conformance"], hash) << r.out;
  EXPECT_TRUE(r.j()["in_line"].get<bool>());
  r = run({"metrics"});
  EXPECT_NE(r.out.find("\nmltune_conformance_info{profile=\"training\",hash=\"" + hash + "\"} 1\n"), std::string::npos)
      << r.out;
  fake.set("/proc/sys/vm/swappiness", "60");
  r = run({"conformance"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("knobs drifted"), std::string::npos) << r.err;
  r = run({"--json", "conformance"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.j()["hash"].is_null());
  EXPECT_EQ(run({"metrics"}).out.find("\nmltune_conformance_info{"), std::string::npos);
  ASSERT_EQ(run({"switch", "inference"}).rc, 0);
  r = run({"conformance"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.substr(0, 8), hash);
  ASSERT_EQ(run({"off"}).rc, 0);
}

TEST(Conformance, OnlyContentCounts) {
  mltune::Profile a;
  a.name = "site";
  mltune::Knob k;
  k.key = "vm.swappiness";
  k.value = "1";
  k.origin = "a.toml:3";
  a.knobs.push_back(k);
  mltune::Profile b = a;
  b.knobs[0].origin = "b.toml:40";
  EXPECT_EQ(mltune::profile_fingerprint(a), mltune::profile_fingerprint(b));
  b.knobs[0].value = "10";
  EXPECT_NE(mltune::profile_fingerprint(a), mltune::profile_fingerprint(b));
  b = a;
  b.name = "sit";
  b.knobs[0].key = "evm.swappiness";
  EXPECT_NE(mltune::profile_fingerprint(a), mltune::profile_fingerprint(b));
}

// Label values are escaped as the exposition format asks.
TEST(Metrics, LabelValuesAreEscaped) {
  mltune::NodeStatus st;
  st.profile = "a\"b\\c\nd";
  st.domains.push_back({"knobs", "applied", ""});
  const auto text = mltune::prometheus_text(mltune::node_metrics(st, "1"));
  EXPECT_NE(text.find("mltune_profile_active{profile=\"a\\\"b\\\\c\\nd\",backend=\"direct\"} 1\n"), std::string::npos)
      << text;
}

// Rough edges: bad cpulists exit 2, a tree is not this machine's network
// or processes, an unknown profile lists the known ones.
TEST_F(Cli, RefusesWhatTheTreeCannotBe) {
  for (const char *bad : {"abc", "5-2", "1,,2"}) {
    const auto r = run({"sched", "apply", "--feeder", bad});
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
  }
  auto r = run({"nic", "show"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("over netlink"), std::string::npos) << r.err;
  r = run({"sched", "watch", "--profile", "training"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("not a running node"), std::string::npos) << r.err;
  r = run({"verify", "nosuch"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("(available: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("training"), std::string::npos) << r.err;
  r = run({"--json", "--dry-run", "boot", "remove"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.j()["dry_run"].get<bool>());
  r = run({"--json", "--dry-run", "persist", "--profile", "training"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.j()["content"].get<std::string>().find("training"), std::string::npos);
}

TEST_F(Cli, SwitchBadInputAppliesNothing) {
  const auto before = fake.snapshot();
  const auto cyc = profile_file("cyc.toml", "include = [\"cyc.toml\"]\n");
  auto r = run({"switch", cyc});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cyc.toml:1: include cycle"), std::string::npos) << r.err;
  const auto unk = profile_file("unk.toml", "[sysctl]\n\"vm.swappiness\" = { value = 1, extra = 2 }\n");
  EXPECT_EQ(run({"switch", unk}).rc, 2);
  const auto mal = profile_file("mal.toml", "[sysctl]\n\"vm.swappiness\" = { value = 1 \n");
  r = run({"switch", mal});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("mal.toml:2:"), std::string::npos) << r.err;
  EXPECT_EQ(run({"switch", "nonexistent"}).rc, 2);
  EXPECT_EQ(fake.snapshot(), before);
  EXPECT_FALSE(fake.root().exists(mltune::k_baseline_file));
}

TEST_F(Cli, SwitchKernelBackend) {
  EXPECT_EQ(run({"switch", "training", "--backend", "kernel"}).rc, 1); // module absent
  fake.add_module();
  auto r = run({"--json", "switch", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["backend"], "kernel");
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "training");
  r = run({"switch", "training", "--backend", "direct"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(run({"verify", "training"}).rc, 0);
}

TEST_F(Cli, Diff) {
  auto r = run({"--json", "diff", "training", "inference"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(r.j()["identical"].get<bool>());
  EXPECT_EQ(run({"diff", "training", "training"}).rc, 0);
  EXPECT_EQ(run({"diff", "training", "nope"}).rc, 2);
}

TEST_F(Cli, Audit) {
  auto r = run({"--json", "audit", "--profile", "inference"});
  EXPECT_EQ(r.rc, 1);
  const auto j = r.j();
  EXPECT_EQ(j["profile"], "inference");
  EXPECT_EQ(j["kernel"], "6.1.0-27-amd64");
  EXPECT_EQ(j["worst"], "warning");
  ASSERT_FALSE(j["findings"].empty());
  for (const auto &f : j["findings"]) {
    for (const auto *k : {"id", "category", "severity", "current", "recommended", "impact", "fix"}) {
      EXPECT_TRUE(f.contains(k)) << k;
    }
  }
  r = run({"audit"});
  EXPECT_NE(r.out.find("against profile 'training'"), std::string::npos);
  EXPECT_NE(r.out.find("[warning] sysctl:vm.swappiness"), std::string::npos) << r.out;
}

TEST_F(Cli, PersistAndRemove) {
  auto r = run({"--dry-run", "persist", "--profile", "inference"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("profile = \"inference\""), std::string::npos) << r.out;
  EXPECT_FALSE(fake.root().exists("/etc/mltune/mltune.toml"));
  r = run({"--json", "persist", "--profile", "inference"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["written"], json::array({"/etc/mltune/mltune.toml"}));
  // The persisted profile is now the default audit uses.
  EXPECT_NE(run({"audit"}).out.find("against profile 'inference'"), std::string::npos);
  // Options change only what they name.
  r = run({"persist", "--pool", "0:64M", "--pool", "1:32", "--user-quota", "8M", "--feeder", "2-3", "--watcher", "on"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"--json", "config", "show"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["profile"], "inference");
  EXPECT_EQ(r.j()["pool"][0]["pages"], 32);
  EXPECT_EQ(r.j()["pool"][1]["pages"], 32);
  EXPECT_EQ(r.j()["user_quota"], 4);
  EXPECT_EQ(r.j()["feeder_cpus"], "2-3");
  EXPECT_EQ(r.j()["watcher"], true);
  EXPECT_EQ(run({"config", "watcher"}).rc, 0);
  EXPECT_EQ(run({"persist", "--watcher", "off", "--no-feeder"}).rc, 0);
  EXPECT_EQ(run({"config", "watcher"}).rc, 1);
  EXPECT_TRUE(run({"--json", "config", "show"}).j()["feeder_cpus"].is_null());
  EXPECT_EQ(run({"persist", "--pool", "0:3M"}).rc, 2);
  EXPECT_EQ(run({"persist", "--profile", "nope"}).rc, 2);
  r = run({"persist", "--remove"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(fake.root().exists("/etc/mltune/mltune.toml"));
}

TEST_F(Cli, ConfigCheckAndApplyExitCodes) {
  EXPECT_EQ(run({"config", "check"}).rc, 2) << "no configuration";
  EXPECT_EQ(run({"config", "watcher"}).rc, 2);
  fake.set("/etc/mltune/mltune.toml", "profile = \"training\"\nwatcher = 1\n");
  auto r = run({"config", "check"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("/etc/mltune/mltune.toml:2: watcher must be true or false"), std::string::npos) << r.err;
  fake.set("/etc/mltune/mltune.toml", "profile = \"nope\"\n");
  r = run({"config", "check"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("profile 'nope'"), std::string::npos) << r.err;
  fake.set("/etc/mltune/mltune.toml", "profile = \"training\"\n");
  EXPECT_EQ(run({"config", "check"}).rc, 0);
  // Checked against this node: a pool on a node it lacks, feeder CPUs it
  // does not have; --syntax-only for a file written for another node.
  fake.set("/sys/devices/system/cpu/online", "0-1\n");
  for (const auto *text : {"[pool]\nreserve = { 7 = \"1G\" }\n", "[feeder]\ncpus = \"0-99\"\n"}) {
    fake.set("/etc/mltune/mltune.toml", text);
    const auto snap = fake.snapshot();
    r = run({"config", "check"});
    EXPECT_EQ(r.rc, 2) << text << r.out;
    EXPECT_NE(r.err.find("/etc/mltune/mltune.toml on this node"), std::string::npos) << r.err;
    EXPECT_EQ(fake.snapshot(), snap) << "config check changed the node";
    r = run({"config", "check", "--syntax-only"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("ok (syntax and profile)"), std::string::npos) << r.out;
  }
  EXPECT_NE(run({"config", "check"}).err.find("[feeder] cpus 0-99: CPUs 2-99 are not online"), std::string::npos);
  fake.set("/etc/mltune/mltune.toml", "profile = \"training\"\n");
  // Applied through the direct backend (no module in this fake), then reverted.
  r = run({"--json", "config", "apply"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.j()["applied"], json::array({"modules", "knobs", "nic"}));
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "1");
  r = run({"config", "revert"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("knobs: direct: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("knob(s) written back"), std::string::npos) << r.out;
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "60");
}

// Container mode: a node's root (it has /proc/1/ns) whose network namespace
// is this process's but whose PID namespace is not (a container without
// hostPID) gets a refusal naming what is missing, and nothing is applied.
TEST_F(Cli, ContainerWithoutTheNodesPidsIsRefused) {
  namespace fs = std::filesystem;
  const fs::path ns = fake.dir() / "proc/1/ns";
  fs::create_directories(ns);
  fs::create_symlink("/proc/self/ns/net", ns / "net");
  fake.set("/proc/1/ns/pid", "");
  fake.set("/proc/1/ns/cgroup", "");
  auto r = run({"sched", "watch", "--profile", "training"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("own PID namespace"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hostPID: true"), std::string::npos) << r.err;
  const auto before = fake.snapshot();
  r = run({"switch", "training"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("sched rules"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("own PID namespace"), std::string::npos) << r.err;
  EXPECT_EQ(fake.snapshot(), before);
  fake.set("/sys/devices/system/cpu/online", "0-1\n");
  r = run({"feeder", "on", "--cpus", "1"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("own PID namespace"), std::string::npos) << r.err;
}

// off leaves a node configuration it did not write (hand, Ansible) as it is
// and says so; that is not a failure.
TEST_F(Cli, OffKeepsAConfigurationItDidNotWrite) {
  const std::string conf = "# written by the site's Ansible role\nprofile = \"training\"\n";
  fake.set("/etc/mltune/mltune.toml", conf);
  ASSERT_EQ(run({"switch", "training"}).rc, 0);
  const auto r = run({"--json", "off"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  bool kept = false;
  const auto j = r.j();
  for (const auto &d : j["domains"]) {
    kept |= d["domain"] == "persist" && d["state"] == "kept";
  }
  EXPECT_TRUE(kept) << r.out;
  EXPECT_EQ(fake.get("/etc/mltune/mltune.toml"), conf);
}

// The pool per node and user in bytes, the quota, and the feeder cores by
// mechanism; no pool family without the module.
TEST(Metrics, PoolAndFeeder) {
  mltune::PoolStatus pool;
  pool.nodes = {{0, 4, 3, 1}, {1, 2, 2, 0}};
  pool.users = {{1000, 2}};
  pool.user_quota = 256;
  mltune::FeederState feeder;
  feeder.active = true;
  feeder.mechanism = "cpuset";
  feeder.cpus = mltune::CpuSet{2, 3, 6};
  const auto text = mltune::prometheus_text(mltune::resource_metrics(pool, feeder));
  EXPECT_NE(text.find("\nmltune_pool_bytes{node=\"0\",state=\"free\"} 6291456\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmltune_pool_bytes{node=\"0\",state=\"mapped\"} 2097152\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmltune_pool_user_mapped_bytes{uid=\"1000\"} 4194304\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmltune_pool_user_quota_bytes 536870912\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmltune_feeder_cpus{mechanism=\"cpuset\"} 3\n"), std::string::npos) << text;
  const auto off = mltune::prometheus_text(mltune::resource_metrics(std::nullopt, mltune::FeederState{}));
  EXPECT_EQ(off.find("mltune_pool"), std::string::npos) << off;
  EXPECT_NE(off.find("\nmltune_feeder_cpus{mechanism=\"off\"} 0\n"), std::string::npos) << off;
}
