// quest patch: MLX's fused ops, seen in the graph on every backend, and a walk of the
// graph that lists what computed an array.
//
// Where MLX keeps a fused op (a GPU's RMSNorm, RoPE, ScaledDotProductAttention) its node
// is in the graph under that name. Where it does not (MLX's CPU backend evaluates none of
// them: `fast::rms_norm` there returns its fallback, a graph of plain ops), mlx-c's entry
// point (mlx/c/fast.cpp, patched) renames the fallback's last node after the fused op
// (`Seen`: `Multiply from RMSNorm`, the same op run the same way, no node added). When
// such a node is evaluated its buffer is remembered, so an array evaluated from it is
// still known by the op that computed it.
//
// `quest_graph_seen` walks the graph from an array down to the arrays it is told to stop
// at (a piece's inputs) and to leaves, and lists each node's name, one a line.

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mlx/c/error.h"
#include "mlx/c/private/mlx.h"
#include "mlx/primitives.h"

namespace {

using mlx::core::array;

// Buffers a `Seen` node was evaluated into, with the op's name; expired ones swept.
std::mutex seen_mutex;
std::vector<std::pair<std::weak_ptr<array::Data>, std::string>> seen_buffers;
size_t sweep_at = 64;

void remember(const std::shared_ptr<array::Data>& data, const std::string& name) {
  if (!data) {
    return;
  }
  std::lock_guard<std::mutex> lock(seen_mutex);
  if (seen_buffers.size() >= sweep_at) {
    std::erase_if(seen_buffers, [](auto& entry) { return entry.first.expired(); });
    sweep_at = std::max<size_t>(64, 2 * seen_buffers.size());
  }
  seen_buffers.emplace_back(data, name);
}

// The fused op whose output this buffer is, or nullptr.
std::string recalled(const std::shared_ptr<array::Data>& data) {
  if (!data) {
    return {};
  }
  std::lock_guard<std::mutex> lock(seen_mutex);
  for (auto& [weak, name] : seen_buffers) {
    auto held = weak.lock();
    if (held && held.get() == data.get()) {
      return name;
    }
  }
  return {};
}

// The last op of MLX's fallback for a fused op, under a name that says so
// (`Multiply from RMSNorm`): it runs the op it wraps, so the graph holds no node more
// than MLX's own, and remembers the buffer it wrote.
class Seen : public mlx::core::Primitive {
 public:
  Seen(std::shared_ptr<mlx::core::Primitive> inner, const char* fused)
      : Primitive(inner->stream()),
        inner_(std::move(inner)),
        fused_(fused),
        name_(std::string(inner_->name()) + " from " + fused) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs)
      override {
    inner_->eval_cpu(inputs, outputs);
    remember(outputs[0].data_shared_ptr(), fused_);
  }
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs)
      override {
    inner_->eval_gpu(inputs, outputs);
    remember(outputs[0].data_shared_ptr(), fused_);
  }
  std::vector<array> jvp(
      const std::vector<array>& primals,
      const std::vector<array>& tangents,
      const std::vector<int>& argnums) override {
    return inner_->jvp(primals, tangents, argnums);
  }
  std::vector<array> vjp(
      const std::vector<array>& primals,
      const std::vector<array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<array>& outputs) override {
    return inner_->vjp(primals, cotangents, argnums, outputs);
  }
  std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs,
      const std::vector<int>& axes) override {
    return inner_->vmap(inputs, axes);
  }
  const char* name() const override {
    return name_.c_str();
  }
  bool is_equivalent(const Primitive& other) const override {
    auto seen = dynamic_cast<const Seen*>(&other);
    return seen != nullptr && seen->fused_ == fused_ &&
        typeid(*seen->inner_) == typeid(*inner_) &&
        inner_->is_equivalent(*seen->inner_);
  }
  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<array>& inputs) override {
    return inner_->output_shapes(inputs);
  }

 private:
  std::shared_ptr<mlx::core::Primitive> inner_;
  std::string fused_;
  std::string name_;
};

} // namespace

// `out` as the fused op `name` computed it: itself where MLX kept the fused op (its node
// bears the name), else its last node under a name that says it came from that op.
mlx::core::array quest_seen(const char* name, mlx::core::array out) {
  if (!out.has_primitive() || !out.siblings().empty() ||
      std::strcmp(out.primitive().name(), name) == 0) {
    return out;
  }
  auto shape = out.shape();
  auto dtype = out.dtype();
  auto inputs = out.inputs();
  return array(
      std::move(shape),
      dtype,
      std::make_shared<Seen>(out.primitive_ptr(), name),
      std::move(inputs));
}

// The names of the nodes that compute `out`, one a line, walking its inputs down to the
// arrays of `stops` and to evaluated arrays. An evaluated array that a fused op computed
// is listed by that op's name and ` (evaluated)`; `out` itself evaluated begins the text
// with `(evaluated)`. At most `limit` nodes are walked (then the last line is `...`).
// The text is malloc'd: the caller frees it with `quest_graph_seen_free`.
extern "C" int quest_graph_seen(
    char** text,
    const mlx_array out,
    const mlx_vector_array stops,
    size_t limit) {
  try {
    auto& root = mlx_array_get_(out);
    std::unordered_set<std::uintptr_t> stop;
    for (auto& a : mlx_vector_array_get_(stops)) {
      stop.insert(a.id());
    }
    std::string lines;
    auto unscheduled = [](const array& a) {
      return a.has_primitive() && a.status() == array::Status::unscheduled;
    };
    if (!unscheduled(root) && stop.count(root.id()) == 0) {
      lines += "(evaluated)\n";
    }
    std::unordered_set<std::uintptr_t> visited;
    std::vector<array> todo{root};
    size_t walked = 0;
    while (!todo.empty()) {
      array a = std::move(todo.back());
      todo.pop_back();
      if (stop.count(a.id()) != 0 || !visited.insert(a.id()).second) {
        continue;
      }
      if (++walked > limit) {
        lines += "...\n";
        break;
      }
      if (!unscheduled(a)) {
        auto name = recalled(a.data_shared_ptr());
        if (!name.empty()) {
          lines += name + " (evaluated)\n";
        }
        continue;
      }
      // A node of several outputs is listed once, through whichever is reached first.
      for (auto& sibling : a.siblings()) {
        visited.insert(sibling.id());
      }
      lines += a.primitive().name();
      lines += "\n";
      for (auto& input : a.inputs()) {
        todo.push_back(input);
      }
    }
    *text = static_cast<char*>(std::malloc(lines.size() + 1));
    std::memcpy(*text, lines.c_str(), lines.size() + 1);
  } catch (std::exception& e) {
    mlx_error(e.what());
    return 1;
  }
  return 0;
}

extern "C" void quest_graph_seen_free(char* text) {
  std::free(text);
}
