// diffvk_bench: published models' shapes for `diffvk bench --shape NAME` (Options::shape): the config.json each
// model publishes, so that Model::synthesize builds a model of that exact shape with random weights.
#pragma once
#include <string>
#include <vector>

namespace diffvk::bench {

struct PublishedShape {
  std::string name;     // the --shape argument
  std::string source;   // the published checkpoint whose config.json this is
  std::string config;   // its config.json text (a native or Hugging Face DiffLlama config)
  std::string refusal;  // non-empty: the shape is known but cannot run yet (why)
};

const std::vector<PublishedShape>& published_shapes();
// The shape called `name`; throws invalid_argument naming the known shapes, or unsupported with the refusal.
const PublishedShape& published_shape(const std::string& name);

}  // namespace diffvk::bench
