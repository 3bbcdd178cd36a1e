// parse_json (bounded_json.hpp): nlohmann's DOM builder driven through a SAX handler that counts the open
// containers. nlohmann parses iteratively, but building, copying, comparing, dumping and destroying a
// value recurse, so a deep value is refused while it is read, before anything is built from it.
// Not nlohmann's parser callback: its end_object scans the whole parent for a discarded value, which is
// quadratic in the entries of an object or array of objects (a safetensors header with 10^5 tensors took
// minutes).
#include "io/bounded_json.hpp"

#include "diffvk/error.hpp"
#include "io/printable.hpp"

namespace diffvk {

namespace {
using json = nlohmann::json;

class BoundedSax : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  BoundedSax(json& result, const std::string& name, const json::parser_callback_t& extra)
      : json_sax_dom_parser(result, true), name_(name), extra_(extra) {}

  bool start_object(std::size_t n) {
    open(json::parse_event_t::object_start);
    return json_sax_dom_parser::start_object(n);
  }
  bool start_array(std::size_t n) {
    open(json::parse_event_t::array_start);
    return json_sax_dom_parser::start_array(n);
  }
  bool end_object() {
    --depth_;
    return json_sax_dom_parser::end_object();
  }
  bool end_array() {
    --depth_;
    return json_sax_dom_parser::end_array();
  }
  bool key(json::string_t& k) {
    if (extra_) {
      json v(k);
      extra_(depth_, json::parse_event_t::key, v);
    }
    return json_sax_dom_parser::key(k);
  }

 private:
  void open(json::parse_event_t ev) {
    if (depth_ >= kJsonMaxDepth)
      throw Error(Status::format_error,
                  name_ + ": JSON nests deeper than " + std::to_string(kJsonMaxDepth) + " levels");
    if (extra_) {
      json none;
      extra_(depth_, ev, none);
    }
    ++depth_;
  }
  const std::string& name_;
  const json::parser_callback_t& extra_;
  int depth_ = 0;  // containers open
};
}  // namespace

nlohmann::json parse_json(const char* data, size_t size, const std::string& name, size_t max_bytes,
                          const nlohmann::json::parser_callback_t& extra) {
  if (size > max_bytes)
    throw Error(Status::format_error, name + ": JSON text of " + std::to_string(size) +
                                          " bytes is larger than the limit of " + std::to_string(max_bytes) + " bytes");
  json result;
  try {
    BoundedSax sax(result, name, extra);
    json::sax_parse(data, data + size, &sax);
  } catch (const json::exception& e) {
    // nlohmann quotes the offending token, which may hold any bytes of the file.
    throw Error(Status::format_error, name + ": invalid JSON (" + printable(e.what(), 300) + ")");
  }
  return result;
}

uint32_t json_uint_in_range(const nlohmann::json& v, const std::string& name, const std::string& key, uint64_t lo,
                            uint64_t hi) {
  if (!v.is_number_integer()) throw Error(Status::format_error, name + ": '" + key + "' must be an integer");
  const bool neg = !v.is_number_unsigned();
  const uint64_t x = neg ? 0 : v.get<uint64_t>();
  if (neg || x < lo || x > hi)
    throw Error(Status::format_error, name + ": '" + key +
                                          "' = " + (neg ? std::to_string(v.get<int64_t>()) : std::to_string(x)) +
                                          " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<uint32_t>(x);
}

}  // namespace diffvk
