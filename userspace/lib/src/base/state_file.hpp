// StateFile<T>: the one way libmltune keeps state between runs.  A versioned
// JSON object below the Sysroot, written atomically (temp file + rename,
// Sysroot::write_file), optionally fsynced.
//
// T converts with nlohmann's ADL pair `to_json(json&, const T&)` /
// `from_json(const json&, T&)` and is stored as one JSON object; the file
// adds a top-level "version" to it.  load():
//   - absent or empty file (left empty by a power failure): std::nullopt;
//   - a "version" newer than this build knows, or text that is not JSON of
//     the expected shape: an error naming the file (never silently dropped);
//   - a file without "version" is version 1 (files written before it).
#pragma once

#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace mltune {

template <class T> class StateFile {
public:
  // `durable`: fsync before the rename.  Files that record values of the
  // running kernel (lost with it on power failure anyway) need not be.
  constexpr StateFile(std::string_view path, int version, bool durable)
      : path_(path), version_(version), durable_(durable) {}

  [[nodiscard]] std::string_view path() const { return path_; }

  [[nodiscard]] Result<std::optional<T>> load(const Sysroot &root) const {
    if (!root.exists(path_)) {
      return std::optional<T>{};
    }
    auto text = root.read(path_);
    if (!text) {
      return text.error();
    }
    if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
      return std::optional<T>{};
    }
    try {
      const auto j = nlohmann::json::parse(*text);
      if (!j.is_object()) {
        return failure(std::string(path_) + ": corrupt state file: not a JSON object");
      }
      const int v = j.value("version", 1);
      if (v > version_) {
        return failure(std::string(path_) + ": state file version " + std::to_string(v) +
                       " is newer than this mltune understands (" + std::to_string(version_) + ")");
      }
      return std::optional<T>(j.get<T>());
    } catch (const nlohmann::json::exception &e) {
      return failure(std::string(path_) + ": corrupt state file: " + e.what());
    }
  }

  // The record, or `none` (a default T: nothing recorded) when there is
  // none; errors as load().
  [[nodiscard]] Result<T> load_or(const Sysroot &root, T none = T{}) const {
    auto v = load(root);
    if (!v) {
      return v.error();
    }
    return *v ? std::move(**v) : std::move(none);
  }

  [[nodiscard]] Status save(const Sysroot &root, const T &value) const {
    nlohmann::json j = value;
    j["version"] = version_;
    return root.write_file(path_, j.dump(1) + "\n", {.durable = durable_, .make_parents = true});
  }

  // Removing an absent file is not an error.
  [[nodiscard]] Status remove(const Sysroot &root) const {
    return root.exists(path_) ? root.remove_file(path_) : Status{};
  }

private:
  std::string_view path_;
  int version_;
  bool durable_;
};

} // namespace mltune
