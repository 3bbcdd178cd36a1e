// diffvk — the fuzz seed corpus (tests/fuzz/make_corpus.py, make_gguf_corpus.py, make_shard_index_corpus.py): ok_*
// files must load, bad_* files must be refused with a format error that names the file.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "diffvk/npy.hpp"
#include "file_test_util.hpp"
#include "io/gguf.hpp"
#include "model/gguf_tokenizer.hpp"
#include "io/safetensors.hpp"
#include "model/shard_index.hpp"

using namespace io_test;
using diffvk::Error;
using diffvk::Status;

namespace fs = std::filesystem;

TEST_CASE("io: fuzz seed corpus") {
  const fs::path root = fs::path(DIFFVK_FUZZ_CORPUS_DIR);
  REQUIRE_MESSAGE(fs::is_directory(root), "fuzz seed corpus not found at " << root.string());
  size_t ok = 0, bad = 0;
  for (const char* kind : {"safetensors", "npy", "gguf", "shard_index"}) {
    if (!fs::is_directory(root / kind)) continue;
    for (const auto& entry : fs::directory_iterator(root / kind)) {
      const std::string name = entry.path().filename().string();
      const std::string path = entry.path().string();
      CAPTURE(path);
      const bool expect_ok = name.rfind("ok_", 0) == 0;
      if (!expect_ok && name.rfind("bad_", 0) != 0) continue;
      try {
        if (std::string(kind) == "safetensors") {
          read_all(diffvk::SafetensorsFile::open(path));
        } else if (std::string(kind) == "shard_index") {
          const auto bytes = get_file(path);
          (void)diffvk::parse_shard_index(reinterpret_cast<const char*>(bytes.data()), bytes.size(), path);
        } else if (std::string(kind) == "gguf") {
          const diffvk::GgufFile f = diffvk::GgufFile::open(path);
          if (name.rfind("ok_tokenizer", 0) == 0) {  // the tokenizer seeds build one (fuzz_gguf starts from them)
            std::string why;
            const auto t = diffvk::gguf_tokenizer(f, &why);
            REQUIRE_MESSAGE(t != nullptr, why);
            const std::vector<int32_t> ids = t->encode("ab", true);
            CHECK(!ids.empty());
          }
        } else {
          read_all(diffvk::read_npy(path));
        }
        CHECK_MESSAGE(expect_ok, "accepted a bad_ file");
        ++ok;
      } catch (const Error& e) {
        CHECK_MESSAGE(!expect_ok, "rejected: " << std::string(e.what()));
        CHECK(e.status() == Status::format_error);
        CHECK(contains(e.what(), name));  // messages name the file
        ++bad;
      }
    }
  }
  CHECK(ok >= 8);
  CHECK(bad >= 8);
}
