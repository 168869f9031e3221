// libFuzzer target for the resident switcher's request parser
// (decode_request, mltune/service.hpp), which reads what any local root
// process sends to the service: any input either decodes into a request
// that encodes and decodes back to the same request, or is an input error
// with a message; nothing else.
#include "mltune/service.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const std::string_view payload(reinterpret_cast<const char *>(data), size);
  auto r = mltune::decode_request(payload);
  if (!r.ok()) {
    if (r.error().kind != mltune::Errc::input || r.error().message.empty()) {
      std::abort();
    }
    return 0;
  }
  if (r->started_ns < 0 || r->args.size() > 256) {
    std::abort();
  }
  auto again = mltune::decode_request(mltune::encode_request(*r));
  if (!again.ok() || again->version != r->version || again->started_ns != r->started_ns || again->args != r->args) {
    std::abort();
  }
  return 0;
}
