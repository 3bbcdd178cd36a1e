// parse_json (bounded_json.hpp): nlohmann's parser with a depth and size bound. nlohmann parses
// iteratively, but building, copying, comparing, dumping and destroying a value recurse, so a deep
// value is refused while it is read, before anything is built from it.
#include "io/bounded_json.hpp"

#include "diffvk/error.hpp"
#include "io/printable.hpp"

namespace diffvk {

nlohmann::json parse_json(const char* data, size_t size, const std::string& name, size_t max_bytes,
                          const nlohmann::json::parser_callback_t& extra) {
  using json = nlohmann::json;
  if (size > max_bytes)
    throw Error(Status::format_error, name + ": JSON text of " + std::to_string(size) + " bytes is larger than the limit of " +
                                          std::to_string(max_bytes) + " bytes");
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    if ((ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) && depth >= kJsonMaxDepth)
      throw Error(Status::format_error, name + ": JSON nests deeper than " + std::to_string(kJsonMaxDepth) + " levels");
    return extra ? extra(depth, ev, parsed) : true;
  };
  try {
    return json::parse(data, data + size, cb);
  } catch (const json::exception& e) {
    // nlohmann quotes the offending token, which may hold any bytes of the file.
    throw Error(Status::format_error, name + ": invalid JSON (" + printable(e.what(), 300) + ")");
  }
}

}  // namespace diffvk
