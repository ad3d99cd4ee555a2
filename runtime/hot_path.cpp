// cukiln's native hot path: the torch ops' per-call work in C++ (cukiln/native.py builds and loads it).
//
// Every cukiln torch op is defined in Python (torch_support.LIBRARY) with a Python kernel that validates, plans and
// launches. Through the dispatcher (eager op calls, torch.compile'd graphs, CUDA-graph captures) a Python kernel
// costs its boxing into Python and its Python frames on every call. This file registers two boxed C++ kernels per
// op instead:
//
//   gate (Autograd key)  a call that needs autograd (grad mode on, a tensor argument requiring grad) goes to the
//                        op's Python autograd kernel (a gradient, or a refusal); every other call redispatches below
//                        autograd, where fake tensors meet their fake kernel and real CUDA tensors the hot kernel.
//   hot  (CUDA key)      the plan cache: a key of the call's metadata (each tensor's shape, strides, dtype, device,
//                        pointer alignment; each scalar's value, except the integer lengths a plan refills), and on a
//                        hit the plan's launches with this call's pointers and lengths written into copies of their
//                        parameter structs: the outputs allocated, the overlap checks and length checks made, the
//                        kernels launched through the driver, written tensors' versions bumped. A miss (or a hit
//                        whose checks fail) calls the op's Python kernel, which validates, raises or launches, and
//                        describes its plan for the next call (runtime/native.py: the description's fields).
//
// The driver is reached through libcuda's own symbols (no CUDA headers needed to build: the few types used are
// declared below as cuda.h lays them out), so the file builds against any torch, with or without CUDA.

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

// --- the driver, as cuda.h declares the parts used here ---------------------------------------------------------

using CUresult = int;
using CUfunction = void*;
using CUcontext = void*;
using CUstream = void*;

struct LaunchAttribute {  // CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union
  int id;
  char pad[4];
  union {
    char bytes[64];
    struct { unsigned x, y, z; } cluster;
    int programmatic;
  } value;
};
constexpr int kAttributeClusterDimension = 4;          // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
constexpr int kAttributeProgrammaticSerialization = 6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

struct LaunchConfig {  // CUlaunchConfig
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
  CUstream stream;
  LaunchAttribute* attributes;
  unsigned attribute_count;
};
static_assert(sizeof(LaunchAttribute) == 72 && offsetof(LaunchAttribute, value) == 8, "CUlaunchAttribute's layout");
static_assert(sizeof(LaunchConfig) == 56 && offsetof(LaunchConfig, stream) == 32, "CUlaunchConfig's layout");

struct Driver {
  CUresult (*launch_ex)(const LaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void**, void**) = nullptr;
  CUresult (*get_current)(CUcontext*) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;

  Driver() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;  // no driver: the hot kernel never launches (CUDA tensors cannot exist either)
    launch_ex = reinterpret_cast<decltype(launch_ex)>(dlsym(lib, "cuLaunchKernelEx"));
    launch = reinterpret_cast<decltype(launch)>(dlsym(lib, "cuLaunchKernel"));
    get_current = reinterpret_cast<decltype(get_current)>(dlsym(lib, "cuCtxGetCurrent"));
    set_current = reinterpret_cast<decltype(set_current)>(dlsym(lib, "cuCtxSetCurrent"));
    error_name = reinterpret_cast<decltype(error_name)>(dlsym(lib, "cuGetErrorName"));
  }

  void check(CUresult result, const char* what, const std::string& symbol) const {
    if (result == 0) return;
    const char* name = "unknown error";
    if (error_name != nullptr) error_name(result, &name);
    TORCH_CHECK(false, what, "(", symbol, ") failed: ", name);
  }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

// --- plans ------------------------------------------------------------------------------------------------------

enum Source : int { kArgument = 0, kOutput = 1, kScratch = 2 };

struct PointerSlot {  // a pointer field: the source tensor's data pointer plus a byte offset
  int64_t offset, source, index, add;
};

struct IntegerSlot {  // an integer field filled with an int argument's value (a length the key leaves out)
  int64_t offset, argument;
};

struct TensorMaps {  // fields holding TMA tensor maps of argument tensors, encoded by Python per pointer set
  // A plan may be dropped by a thread without the GIL (the last call using it after a clear): its Python object is
  // released under the GIL, or leaked once the interpreter is gone.
  ~TensorMaps() {
    if (!Py_IsInitialized()) {
      encode.release();
      return;
    }
    py::gil_scoped_acquire gil;
    encode = py::object();
  }
  std::vector<int64_t> offsets, arguments;
  py::object encode;  // encode(pointers tuple) -> list of bytes, one per offset
  std::mutex lock;    // threads launching one plan with other caches each: the last maps change under it
  std::vector<int64_t> last_pointers;
  std::vector<std::string> last_maps;
};

struct Launch {
  std::string symbol;
  CUfunction function = nullptr;
  CUcontext context = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared = 0, cluster = 1;
  bool programmatic = false;
  std::string params;  // the parameter struct with every refilled field at its base value
  std::vector<PointerSlot> pointers;
  std::vector<IntegerSlot> integers;
  std::unique_ptr<TensorMaps> maps;
};

struct Allocation {
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype;
};

struct Overlap {  // a written argument tensor and a read one whose byte spans must not meet
  int64_t written, checked, written_lo, written_hi, checked_lo, checked_hi;
  // Rows of two slices of one buffer (q and k of a fused projection) interleave: where the pointers' distance
  // modulo ``modulus`` lies in [lo, hi] their bytes never meet although their spans do (0: no such window).
  int64_t modulus, lo, hi;
};

struct IntegerBound {  // lo <= value <= hi, for an int argument the key leaves out
  int64_t argument, lo, hi;
};

// A value a variant's call does not return (decode's lse where the caller did not ask for it): None in its place.
constexpr int64_t kNothing = INT64_MIN;

struct Plan {
  bool python_only = true;  // the op's Python kernel serves every call of this key
  int64_t device = 0;
  std::vector<Launch> launches;
  std::vector<Allocation> outputs, scratch;
  // The scratch tensors live in one allocation of ``scratch_bytes``, each at its offset (256-byte aligned): they
  // never leave the call, so one allocation serves them all.
  std::vector<int64_t> scratch_offsets;
  int64_t scratch_bytes = 0;
  // each value the op returns: an output's index, -1 - i for argument i (a caller's output, given as one), or
  // kNothing (a variant's only)
  std::vector<int64_t> returns;
  std::vector<Overlap> overlaps;
  std::vector<IntegerBound> bounds;
  std::vector<std::pair<int64_t, int64_t>> ordered;  // (a, b): int argument a <= int argument b
  std::vector<int64_t> bumps;  // argument tensors written (their versions are bumped)
};

constexpr size_t kMaxPlans = 4096;  // per op, as the Python plan caches: cleared when full

// Bumped by clear() (a forced dispatch choice): a plan described by a miss that a clear overtook is not kept, since
// it may have been made under the old choice.
std::atomic<uint64_t> generation{0};

// --- stage timers (a CUKILN_NATIVE_TIMERS=1 build only; `git show 6d07f26:benchmarks/studies/hot_path_stages.py`) ---
// Each stage of a public call's plan-cache hit adds the time since the stage before to its op's total: where a hit's
// host time goes. A few steady_clock reads per call; compiled out of every other build.
constexpr size_t kStages = 9;  // native.STAGES names them
#ifdef CUKILN_HOT_PATH_TIMERS
thread_local std::chrono::steady_clock::time_point stage_clock;
#define STAGE_START() (stage_clock = std::chrono::steady_clock::now())
#define STAGE(state, i)                                                                                              \
  do {                                                                                                               \
    const auto now = std::chrono::steady_clock::now();                                                               \
    (state).stage_ns[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - stage_clock).count();          \
    stage_clock = now;                                                                                               \
  } while (false)
#define STAGES_DONE(state) (++(state).stage_calls)
#else
#define STAGE_START() ((void)0)
#define STAGE(state, i) ((void)0)
#define STAGES_DONE(state) ((void)0)
#endif

struct OpState {
  explicit OpState(c10::OperatorHandle handle) : op(std::move(handle)) {
    for (const auto& a : op.schema().arguments()) {
      // type(), not real_type(): a SymInt argument is an int to a call from Python, as the dispatcher makes it
      const c10::TypePtr& type = a.type();
      kinds.push_back(type->kind() == c10::TypeKind::OptionalType ? type->containedType(0)->kind() : type->kind());
    }
  }
  std::string name;
  c10::OperatorHandle op;
  py::object miss;      // the Python kernel: miss(*arguments) -> (result, description, None or False)
  py::object autograd;  // the Python autograd kernel: autograd(*arguments) -> result
  std::vector<bool> per_call;  // int arguments left out of the key (refilled lengths)
  // tensor arguments (a variant's outputs included) that, requiring grad with grad mode on, make fast_call hand the
  // call back: the public function refuses it, cukiln.torch's wrapper takes it through autograd
  std::vector<bool> grad_refused;
  // A variant's arguments past the schema's: tensors the caller gives for the op's outputs (a public call's out=),
  // which the key, the checks and the launches see as arguments; no dispatcher kernel reaches a variant.
  size_t extra = 0;
  bool variant = false;  // a variant's plans may return kNothing
  std::vector<c10::TypeKind> kinds;  // each schema argument's type (an optional's contained type), for fast_call
  std::array<int64_t, kStages> stage_ns{};  // a timers build's totals per stage (one thread; see above)
  int64_t stage_calls = 0;
  // calls its Python kernel served (a miss, a key not covered, a Python-only plan, a failed check): what tells a
  // test that a hit stayed in C++, where a plan count alone cannot
  std::atomic<int64_t> python_calls{0};
  std::mutex lock;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans;
};

// Never destroyed: the ops' states hold Python objects, which must not be released after the interpreter is gone,
// and their kernels stay registered as long as the process lives.
std::mutex registry_lock;
std::unordered_map<std::string, std::unique_ptr<OpState>>& registry() {
  static auto* ops = new std::unordered_map<std::string, std::unique_ptr<OpState>>();
  return *ops;
}
std::unordered_map<int, std::unique_ptr<torch::Library>>& libraries() {  // one per dispatch key
  static auto* by_key = new std::unordered_map<int, std::unique_ptr<torch::Library>>();
  return *by_key;
}

// --- the key ----------------------------------------------------------------------------------------------------

// The key's bytes, gathered in a buffer on the stack and appended to the key once (a std::string append per field
// cost the decode step's 28-argument key 1.4 µs a call, by that study); a key longer than the buffer goes into the
// string a buffer at a time.
class KeyWriter {
 public:
  explicit KeyWriter(std::string& key) : key_(key) {}
  ~KeyWriter() { flush(); }
  void put(char c) {
    make_room(1);
    buffer_[size_++] = c;
  }
  template <typename T>
  void put_value(T value) {
    make_room(sizeof(T));
    std::memcpy(buffer_ + size_, &value, sizeof(T));
    size_ += sizeof(T);
  }
  void put_bytes(const char* bytes, size_t count) {
    make_room(count);
    if (count > sizeof buffer_) {
      key_.append(bytes, count);
      return;
    }
    std::memcpy(buffer_ + size_, bytes, count);
    size_ += count;
  }

 private:
  void make_room(size_t count) {
    if (size_ + count > sizeof buffer_) flush();
  }
  void flush() {
    key_.append(buffer_, size_);
    size_ = 0;
  }
  std::string& key_;
  char buffer_[1024];
  size_t size_ = 0;
};

// The call's key, or false where an argument is of a kind the key does not cover (the Python kernel serves it).
bool key_of(const torch::jit::Stack& stack, size_t first, size_t count, const OpState& state, std::string& key) {
  KeyWriter w(key);
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        w.put('u');
        continue;
      }
      w.put('t');
      w.put_value<int64_t>(t.dim());
      for (int64_t n : t.sizes()) w.put_value(n);
      for (int64_t n : t.strides()) w.put_value(n);
      w.put_value<int8_t>(static_cast<int8_t>(t.scalar_type()));
      w.put_value<int8_t>(static_cast<int8_t>(t.device().type()));
      w.put_value<int8_t>(t.device().index());
      w.put_value<int8_t>(t.is_neg() || t.is_conj());
      w.put_value<int8_t>(static_cast<int8_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) & 15));
    } else if (v.isNone()) {
      w.put('n');
    } else if (v.isInt()) {
      w.put('i');
      if (!state.per_call[i]) w.put_value<int64_t>(v.toInt());
    } else if (v.isDouble()) {
      w.put('d');
      w.put_value<double>(v.toDouble());
    } else if (v.isBool()) {
      w.put(v.toBool() ? 'T' : 'F');
    } else if (v.isString()) {
      const auto& s = v.toStringRef();
      w.put('s');
      w.put_value<int64_t>(static_cast<int64_t>(s.size()));
      w.put_bytes(s.data(), s.size());
    } else if (v.isIntList()) {
      w.put('l');
      auto list = v.toIntList();
      w.put_value<int64_t>(static_cast<int64_t>(list.size()));
      for (int64_t n : list) w.put_value(n);
    } else {
      return false;
    }
  }
  return true;
}

// --- the hot kernel ---------------------------------------------------------------------------------------------

std::shared_ptr<Plan> plan_of(const py::object& description, size_t count, size_t returned, bool variant);

// ``fn`` (an op's Python miss or autograd kernel) on the ``count`` arguments atop the stack, which it pops: its
// answer. The caller holds the GIL.
py::object call_python(const py::object& fn, torch::jit::Stack* stack, size_t count) {
  auto arguments = torch::jit::last(*stack, count);
  py::tuple args(count);
  for (size_t i = 0; i < count; ++i) args[i] = torch::jit::toPyObject(arguments[i]);
  torch::jit::drop(*stack, count);
  return fn(*args);
}

// A Python result pushed as the op's returns (the caller holds the GIL); a variant's None (a value its caller did
// not ask for) stays None.
void push_returns(const c10::FunctionSchema& schema, const py::object& result, torch::jit::Stack* stack,
                  bool variant = false) {
  const auto& returns = schema.returns();
  auto push = [stack, variant](const py::handle& value, const c10::TypePtr& type) {
    stack->push_back(variant && value.is_none() ? c10::IValue() : torch::jit::toIValue(value, type));
  };
  if (returns.size() == 1) {
    push(result, returns[0].type());
  } else if (returns.size() > 1) {
    py::tuple values = result;
    for (size_t i = 0; i < returns.size(); ++i) push(values[i], returns[i].type());
  }
}

// The Python kernel on the call's arguments: its result pushed as the op's returns, its plan (if it describes one)
// kept under ``key`` (empty: not cacheable).
void run_python(const c10::OperatorHandle& op, OpState& state, torch::jit::Stack* stack, const std::string& key,
                bool describe) {
  const size_t count = op.schema().arguments().size() + state.extra;
  state.python_calls.fetch_add(1, std::memory_order_relaxed);
  py::gil_scoped_acquire gil;
  const uint64_t before = generation.load();
  py::tuple answer = call_python(state.miss, stack, count);
  // a description of False: this call's plan is not to be kept, not even as Python-only (one call's peculiarity)
  py::object description = answer[1];
  if (describe && !key.empty() && description.ptr() != Py_False) {
    auto plan = plan_of(description, count, op.schema().returns().size(), state.variant);
    std::unordered_map<std::string, std::shared_ptr<Plan>> evicted;  // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> guard(state.lock);
      if (generation.load() == before) {
        if (state.plans.size() >= kMaxPlans) std::swap(evicted, state.plans);
        state.plans[key] = plan;
      }
    }
  }
  push_returns(op.schema(), answer[0], stack, state.variant);
}

int64_t pointer_of(const c10::IValue& v) {
  if (!v.isTensor()) return 0;
  const at::Tensor& t = v.toTensor();
  return t.defined() ? reinterpret_cast<int64_t>(t.data_ptr()) : 0;
}

// Whether this call passes the checks a plan leaves to each call (lengths in range, written tensors apart from
// the ones read); a call that fails them goes to the Python kernel, which raises the error that explains it.
bool passes(const Plan& plan, const c10::IValue* args) {
  for (const auto& b : plan.bounds) {
    int64_t value = args[b.argument].toInt();
    if (value < b.lo || value > b.hi) return false;
  }
  for (const auto& [a, b] : plan.ordered) {
    if (args[a].toInt() > args[b].toInt()) return false;
  }
  for (const auto& o : plan.overlaps) {
    int64_t w = pointer_of(args[o.written]), c = pointer_of(args[o.checked]);
    if (w == 0 || c == 0) continue;
    if (w + o.written_lo < c + o.checked_hi && c + o.checked_lo < w + o.written_hi) {
      if (o.modulus == 0) return false;
      int64_t distance = ((c - w) % o.modulus + o.modulus) % o.modulus;
      if (distance < o.lo || distance > o.hi) return false;
    }
  }
  return true;
}

void launch(const Driver& d, Launch& l, const c10::IValue* args, const std::vector<at::Tensor>& outputs,
            const Plan& plan, int64_t scratch, CUstream stream) {
  alignas(64) char params[4096];
  std::memcpy(params, l.params.data(), l.params.size());
  for (const auto& s : l.pointers) {
    int64_t base = s.source == kArgument ? pointer_of(args[s.index])
                   : s.source == kOutput ? reinterpret_cast<int64_t>(outputs[s.index].data_ptr())
                                         : scratch + plan.scratch_offsets[s.index];
    int64_t value = base + s.add;
    std::memcpy(params + s.offset, &value, sizeof value);
  }
  for (const auto& s : l.integers) {
    int64_t value = args[s.argument].toInt();
    std::memcpy(params + s.offset, &value, sizeof value);
  }
  if (l.maps) {
    TensorMaps& m = *l.maps;
    bool kept = false;
    {  // the maps of the call before, copied straight in where its pointers were these (a decode loop's caches)
      std::lock_guard<std::mutex> guard(m.lock);
      kept = m.last_maps.size() == m.offsets.size() && m.last_pointers.size() == m.arguments.size();
      for (size_t i = 0; kept && i < m.arguments.size(); ++i)
        kept = m.last_pointers[i] == pointer_of(args[m.arguments[i]]);
      if (kept) {
        for (size_t i = 0; i < m.offsets.size(); ++i)
          std::memcpy(params + m.offsets[i], m.last_maps[i].data(), m.last_maps[i].size());
      }
    }
    if (!kept) {  // new caches: their maps encoded once, then kept
      std::vector<int64_t> now;
      now.reserve(m.arguments.size());
      for (int64_t a : m.arguments) now.push_back(pointer_of(args[a]));
      std::vector<std::string> maps;
      {  // the GIL is never taken with the lock held (a thread in call() holds the GIL and may wait for the lock)
        py::gil_scoped_acquire gil;
        py::tuple pointers(now.size());
        for (size_t i = 0; i < now.size(); ++i) pointers[i] = py::int_(now[i]);
        for (auto item : py::list(m.encode(pointers))) maps.push_back(item.cast<std::string>());
      }
      TORCH_CHECK(maps.size() == m.offsets.size(), "cukiln native hot path: ", maps.size(), " tensor maps for ",
                  m.offsets.size(), " fields (", l.symbol, ")");
      for (size_t i = 0; i < m.offsets.size(); ++i) std::memcpy(params + m.offsets[i], maps[i].data(), maps[i].size());
      std::lock_guard<std::mutex> guard(m.lock);
      m.last_pointers = std::move(now);
      m.last_maps = std::move(maps);
    }
  }
  void* kernel_params[] = {params};
  CUcontext current = nullptr;
  d.check(d.get_current(&current), "cuCtxGetCurrent", l.symbol);
  const bool switch_context = current != l.context;  // a tensor on another device than the thread's current one
  if (switch_context) d.check(d.set_current(l.context), "cuCtxSetCurrent", l.symbol);
  CUresult result;
  if (l.programmatic) {
    LaunchAttribute attributes[2] = {};
    attributes[0].id = kAttributeProgrammaticSerialization;
    attributes[0].value.programmatic = 1;
    unsigned count = 1;
    if (l.cluster > 1) {
      attributes[1].id = kAttributeClusterDimension;
      attributes[1].value.cluster = {l.cluster, 1, 1};
      count = 2;
    }
    LaunchConfig config{l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.shared, stream,
                        attributes, count};
    result = d.launch_ex(&config, l.function, kernel_params, nullptr);
  } else {
    result = d.launch(l.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.shared,
                      stream, kernel_params, nullptr);
  }
  if (switch_context) d.set_current(current);
  d.check(result, "cuLaunchKernel", l.symbol);
}

// The allocator torch's own CUDA tensors come from: read off the storage of the first tensor at::empty_strided makes
// here (a caching allocator, or one a program swapped in before torch's first CUDA allocation, after which torch
// refuses a swap), so that a hit allocates exactly as torch would.
std::atomic<c10::Allocator*> torch_cuda_allocator{nullptr};

// A hit's allocations, as at::empty_strided makes them on ``device`` (torch's CUDA allocator, on the current stream)
// but without the dispatcher: about a microsecond less per tensor. Through at::empty_strided itself for the first
// one (which names the allocator) and where deterministic algorithms fill fresh memory (at::empty_strided fills it).
struct Allocator {
  explicit Allocator(c10::Device device) : device(device) {
    const auto& context = at::globalContext();
    direct = !(context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory());
  }
  at::Tensor operator()(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
    c10::Allocator* allocator = direct ? torch_cuda_allocator.load() : nullptr;
    if (allocator == nullptr) {
      at::Tensor t = at::empty_strided(sizes, strides, at::TensorOptions().device(device).dtype(dtype));
      if (direct) torch_cuda_allocator.store(t.storage().allocator());
      return t;
    }
    if (!guard) guard.emplace(device);  // the caching allocator serves the current device
    return at::Tensor(at::detail::empty_strided_generic(sizes, strides, allocator,
                                                        c10::DispatchKeySet(c10::DispatchKey::CUDA), dtype));
  }
  c10::Device device;
  bool direct;
  std::optional<c10::DeviceGuard> guard;
};

void run_hot(OpState& state, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t count = op.schema().arguments().size() + state.extra;
  const size_t first = stack->size() - count;
  std::string key;
  if (!key_of(*stack, first, count, state, key)) {
    run_python(op, state, stack, std::string(), false);
    return;
  }
  STAGE(state, 1);
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> guard(state.lock);
    auto found = state.plans.find(key);
    if (found != state.plans.end()) plan = found->second;
  }
  STAGE(state, 2);
  const c10::IValue* args = stack->data() + first;
  if (plan == nullptr || plan->python_only || !passes(*plan, args)) {
    run_python(op, state, stack, key, plan == nullptr);
    return;
  }
  STAGE(state, 3);
  const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(plan->device));
  std::vector<at::Tensor> outputs;
  at::Tensor scratch;
  if (!plan->outputs.empty() || plan->scratch_bytes > 0) {
    Allocator allocate(device);
    outputs.reserve(plan->outputs.size());
    for (const auto& a : plan->outputs) outputs.push_back(allocate(a.sizes, a.strides, a.dtype));
    if (plan->scratch_bytes > 0) scratch = allocate({plan->scratch_bytes}, {1}, c10::ScalarType::Byte);
  }
  STAGE(state, 4);
  const int64_t scratch_base = scratch.defined() ? reinterpret_cast<int64_t>(scratch.data_ptr()) : 0;
  if (!plan->launches.empty()) {
    const Driver& d = driver();
    TORCH_CHECK(d.launch != nullptr && d.launch_ex != nullptr && d.get_current != nullptr && d.set_current != nullptr,
                "cukiln native hot path: libcuda.so.1 and its launch functions were not found");
    auto stream = static_cast<CUstream>(
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle());
    STAGE(state, 5);
    for (auto& l : plan->launches) launch(d, l, args, outputs, *plan, scratch_base, stream);
    STAGE(state, 6);
  }
  for (int64_t a : plan->bumps) {  // inference tensors have no version counter (the Python path skips them too)
    c10::TensorImpl* written = args[a].toTensor().unsafeGetTensorImpl();
    if (!written->is_inference()) written->bump_version();
  }
  // scratch (split results) lives until here: the caching allocator orders any reuse after the queued kernels
  std::vector<c10::IValue> returned;
  returned.reserve(plan->returns.size());
  for (int64_t r : plan->returns) {
    returned.push_back(r == kNothing ? c10::IValue() : r >= 0 ? c10::IValue(outputs[r]) : args[-1 - r]);
  }
  torch::jit::drop(*stack, count);
  for (auto& v : returned) stack->push_back(std::move(v));
  STAGE(state, 7);
  STAGES_DONE(state);
}

// The hot kernel as the dispatcher holds it: bound to its op's state at registration (no lookup per call).
struct Hot final : c10::OperatorKernel {
  explicit Hot(OpState* state) : state(state) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    STAGE_START();
    run_hot(*state, op, stack);
  }
  OpState* state;
};

// --- specialized ops (runtime/specialize.py defines them) -------------------------------------------------------

// An op specialized to one traced call's constant arguments (its Nones, bools, strings and plain numbers): its schema
// keeps only the call's tensors and traced symbols, so that the dispatcher and a compiled graph handle fewer
// arguments than the op's 12-28. Its kernels put the constants back and run the op's own: the same plans (one plan
// cache), the same autograd kernel, the same misses. One that returns fewer values than the op (an attention's out
// without its lse) runs a variant that returns None for the rest, and drops them.
struct Specialized {
  OpState* op_state;  // the op it specializes, or that op's variant
  std::vector<size_t> given;  // each of its arguments' index among the op's
  std::vector<c10::IValue> values;  // the op's arguments with the constants in place (the given ones None)
  size_t dropped = 0;  // the op's last returns that this one does not return
};

// The specialized op's arguments atop the stack replaced by the op's, in the op's order: the op's values pushed
// after them, the given ones moved into their places, then the specialized op's (moved-from) arguments erased. No
// allocation beyond the stack's own growth.
void expand(const Specialized& s, torch::jit::Stack* stack) {
  const size_t count = s.given.size();
  const size_t first = stack->size() - count;
  stack->insert(stack->end(), s.values.begin(), s.values.end());
  for (size_t i = 0; i < count; ++i) (*stack)[first + count + s.given[i]] = std::move((*stack)[first + i]);
  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first),
               stack->begin() + static_cast<std::ptrdiff_t>(first + count));
}

struct SpecializedHot final : c10::OperatorKernel {
  explicit SpecializedHot(Specialized* s) : s(s) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    STAGE_START();
    expand(*s, stack);
    run_hot(*s->op_state, s->op_state->op, stack);
    torch::jit::drop(*stack, s->dropped);
  }
  Specialized* s;
};

// --- the gate ---------------------------------------------------------------------------------------------------

// Whether a call of ``op`` atop the stack needs autograd: grad mode on and a tensor argument requiring grad.
bool needs_grad(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const auto& v : torch::jit::last(stack, op.schema().arguments().size())) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad()) return true;
  }
  return false;
}

// The Autograd key's kernel of the op of ``state``, or of ``specialized``, a specialization of it: a call that needs
// no autograd goes below it (a specialized op stays itself there: a trace records it, its fake kernel shapes it); one
// that does runs the op's Python autograd kernel on the op's arguments.
void gate(OpState& state, const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack,
          const Specialized* specialized) {
  if (!needs_grad(op, *stack)) {
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  if (specialized != nullptr) expand(*specialized, stack);
  const c10::FunctionSchema& schema = state.op.schema();
  py::gil_scoped_acquire gil;
  push_returns(schema, call_python(state.autograd, stack, schema.arguments().size()), stack);
  if (specialized != nullptr) torch::jit::drop(*stack, specialized->dropped);
}

struct Gate final : c10::OperatorKernel {
  explicit Gate(OpState* state) : state(state) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    gate(*state, op, keys, stack, nullptr);
  }
  OpState* state;
};

struct SpecializedGate final : c10::OperatorKernel {
  explicit SpecializedGate(Specialized* s) : s(s) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    gate(*s->op_state, op, keys, stack, s);
  }
  Specialized* s;
};

// --- descriptions (runtime/native.py builds them) -----------------------------------------------------------------

template <typename T>
std::vector<T> ints(const py::handle& h) {
  std::vector<T> out;
  for (auto item : h) out.push_back(item.cast<T>());
  return out;
}

#define CHECK_DESCRIPTION(condition, what) TORCH_CHECK(condition, "cukiln native hot path: a description's ", what)

// A plan from a description (runtime/native.py), checked once against the op's ``count`` arguments (a variant's
// included) and ``returned`` values, so that replaying it can neither write past a struct nor read past the stack.
std::shared_ptr<Plan> plan_of(const py::object& description, size_t count, size_t returned, bool variant) {
  auto plan = std::make_shared<Plan>();
  if (description.is_none()) return plan;  // python_only
  auto argument = [count](int64_t i) { return i >= 0 && static_cast<size_t>(i) < count; };
  py::dict d = description;
  plan->python_only = false;
  plan->device = d["device"].cast<int64_t>();
  for (auto item : d["launches"]) {
    py::dict l = item.cast<py::dict>();
    Launch launch;
    launch.symbol = l["symbol"].cast<std::string>();
    launch.function = reinterpret_cast<CUfunction>(l["function"].cast<uintptr_t>());
    launch.context = reinterpret_cast<CUcontext>(l["context"].cast<uintptr_t>());
    auto grid = ints<unsigned>(l["grid"]), block = ints<unsigned>(l["block"]);
    CHECK_DESCRIPTION(grid.size() == 3 && block.size() == 3, "grid and block have three dims");
    std::copy(grid.begin(), grid.end(), launch.grid);
    std::copy(block.begin(), block.end(), launch.block);
    launch.shared = l["shared"].cast<unsigned>();
    launch.cluster = l["cluster"].cast<unsigned>();
    launch.programmatic = l["programmatic"].cast<bool>();
    CHECK_DESCRIPTION(launch.cluster == 1 || launch.programmatic, "cluster launches are programmatic ones");
    launch.params = l["params"].cast<std::string>();
    const auto size = static_cast<int64_t>(launch.params.size());
    CHECK_DESCRIPTION(size <= 4096, "parameter struct fits 4096 bytes");
    auto field = [size](int64_t offset, int64_t bytes) { return offset >= 0 && offset + bytes <= size; };
    for (auto s : l["pointers"]) {
      auto v = ints<int64_t>(s);
      CHECK_DESCRIPTION(v.size() == 4 && field(v[0], 8) && v[1] >= kArgument && v[1] <= kScratch && v[2] >= 0 &&
                            (v[1] != kArgument || argument(v[2])), "pointer slot is in range");
      launch.pointers.push_back({v[0], v[1], v[2], v[3]});
    }
    for (auto s : l["integers"]) {
      auto v = ints<int64_t>(s);
      CHECK_DESCRIPTION(v.size() == 2 && field(v[0], 8) && argument(v[1]), "integer slot is in range");
      launch.integers.push_back({v[0], v[1]});
    }
    if (!l["maps"].is_none()) {
      py::tuple m = l["maps"];
      launch.maps = std::make_unique<TensorMaps>();
      launch.maps->offsets = ints<int64_t>(m[0]);
      launch.maps->arguments = ints<int64_t>(m[1]);
      launch.maps->encode = m[2];
      for (int64_t offset : launch.maps->offsets) CHECK_DESCRIPTION(field(offset, 128), "tensor map field fits");
      for (int64_t a : launch.maps->arguments) CHECK_DESCRIPTION(argument(a), "tensor map argument is in range");
    }
    plan->launches.push_back(std::move(launch));
  }
  for (const char* which : {"outputs", "scratch"}) {
    auto& into = std::string(which) == "outputs" ? plan->outputs : plan->scratch;
    for (auto item : d[which]) {
      py::tuple a = item.cast<py::tuple>();
      into.push_back({ints<int64_t>(a[0]), ints<int64_t>(a[1]),
                      static_cast<c10::ScalarType>(a[2].cast<int64_t>())});
      CHECK_DESCRIPTION(into.back().sizes.size() == into.back().strides.size(), "allocation has a stride per dim");
    }
  }
  for (const auto& a : plan->scratch) {
    plan->scratch_offsets.push_back(plan->scratch_bytes);
    const auto bytes = static_cast<int64_t>(at::detail::computeStorageNbytes(a.sizes, a.strides, c10::elementSize(a.dtype)));
    plan->scratch_bytes += (bytes + 255) / 256 * 256;
  }
  for (const auto& l : plan->launches) {
    for (const auto& s : l.pointers) {
      const size_t allocated = s.source == kOutput ? plan->outputs.size() : plan->scratch.size();
      CHECK_DESCRIPTION(s.source == kArgument || static_cast<size_t>(s.index) < allocated,
                        "pointer slot names an allocation it has");
    }
  }
  for (auto item : d["returns"]) plan->returns.push_back(item.is_none() ? kNothing : item.cast<int64_t>());
  CHECK_DESCRIPTION(plan->returns.size() == returned, "returns match the op's");
  for (int64_t r : plan->returns) {
    CHECK_DESCRIPTION(r == kNothing ? variant : r >= 0 ? static_cast<size_t>(r) < plan->outputs.size() : argument(-1 - r),
                      "return is in range (None only for a variant)");
  }
  for (auto item : d["overlaps"]) {
    auto v = ints<int64_t>(item);
    CHECK_DESCRIPTION(v.size() == 9 && argument(v[0]) && argument(v[1]) && v[6] >= 0, "overlap check is in range");
    plan->overlaps.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]});
  }
  for (auto item : d["bounds"]) {
    auto v = ints<int64_t>(item);
    CHECK_DESCRIPTION(v.size() == 3 && argument(v[0]), "bound is in range");
    plan->bounds.push_back({v[0], v[1], v[2]});
  }
  for (auto item : d["ordered"]) {
    auto v = ints<int64_t>(item);
    CHECK_DESCRIPTION(v.size() == 2 && argument(v[0]) && argument(v[1]), "ordered pair is in range");
    plan->ordered.emplace_back(v[0], v[1]);
  }
  plan->bumps = ints<int64_t>(d["bumps"]);
  for (int64_t b : plan->bumps) CHECK_DESCRIPTION(argument(b), "written tensor is in range");
  return plan;
}

// --- what Python calls ------------------------------------------------------------------------------------------

torch::Library& library(c10::DispatchKey key) {
  auto& l = libraries()[static_cast<int>(key)];
  if (!l) l = std::make_unique<torch::Library>(torch::Library::IMPL, "cukiln", key, __FILE__, __LINE__);
  return *l;
}

// The state registered under ``name``, with its Python functions replaced and its plans dropped (a module that
// registers again, e.g. reloaded), or null: handles given out stay valid.
OpState* reregistered(const std::string& name, py::object& miss, py::object& autograd, std::vector<bool>* per_call,
                      std::vector<bool>* grad_refused) {
  std::unordered_map<std::string, std::shared_ptr<Plan>> dropped;  // destroyed after the locks are released
  std::lock_guard<std::mutex> guard(registry_lock);  // (declared after ``dropped``: released before it goes)
  auto found = registry().find(name);
  if (found == registry().end()) return nullptr;
  OpState& state = *found->second;
  std::lock_guard<std::mutex> op_guard(state.lock);
  std::swap(dropped, state.plans);
  state.miss = std::move(miss);
  state.autograd = std::move(autograd);
  if (per_call != nullptr) state.per_call = std::move(*per_call);
  if (grad_refused != nullptr) state.grad_refused = std::move(*grad_refused);
  generation.fetch_add(1);
  return &state;
}

int64_t register_op(const std::string& name, py::object miss, py::object autograd, std::vector<bool> per_call,
                    std::vector<bool> grad_refused) {
  if (OpState* existing = reregistered("cukiln::" + name, miss, autograd, &per_call, &grad_refused))
    return reinterpret_cast<int64_t>(existing);
  auto state = std::make_unique<OpState>(
      c10::Dispatcher::singleton().findSchemaOrThrow(("cukiln::" + name).c_str(), ""));
  const size_t count = state->op.schema().arguments().size();
  TORCH_CHECK(per_call.size() == count && grad_refused.size() == count, "cukiln native hot path: cukiln::", name,
              " takes ", count, " arguments; its masks have ", per_call.size(), " and ", grad_refused.size());
  state->name = "cukiln::" + name;
  state->miss = std::move(miss);
  state->autograd = std::move(autograd);
  state->per_call = std::move(per_call);
  state->grad_refused = std::move(grad_refused);
  OpState* handle = state.get();
  {
    std::lock_guard<std::mutex> guard(registry_lock);
    registry()[state->name] = std::move(state);
  }
  library(c10::DispatchKey::CUDA).impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Hot>(handle)));
  library(c10::DispatchKey::Autograd).impl(name.c_str(),
                                           torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Gate>(handle)));
  return reinterpret_cast<int64_t>(handle);
}

// C++ kernels for cukiln::``name``, a specialization of op ``handle`` (register_op's, or a variant without extra
// arguments whose plans return None for the op's last returns that ``name`` leaves out) whose arguments are the
// op's ``given`` ones; ``values`` holds the op's every argument (the given ones None), converted as its schema types
// them.
void register_specialized(int64_t handle, const std::string& name, std::vector<int64_t> given, const py::list& values) {
  OpState& state = *reinterpret_cast<OpState*>(handle);
  const auto& declared = state.op.schema().arguments();
  const c10::OperatorHandle own = c10::Dispatcher::singleton().findSchemaOrThrow(("cukiln::" + name).c_str(), "");
  const size_t returned = own.schema().returns().size(), op_returns = state.op.schema().returns().size();
  TORCH_CHECK(state.extra == 0 && values.size() == declared.size() && given.size() == own.schema().arguments().size() &&
                  (state.variant ? returned < op_returns : returned == op_returns),
              "cukiln native hot path: specialization ", name, " does not match ", state.name);
  auto s = std::make_unique<Specialized>();
  s->op_state = &state;
  s->dropped = op_returns - returned;
  for (size_t i = 0; i < declared.size(); ++i) {
    s->values.push_back(values[i].is_none() ? c10::IValue() : torch::jit::toIValue(values[i], declared[i].real_type()));
  }
  for (size_t j = 0; j < given.size(); ++j) {
    const int64_t g = given[j];
    TORCH_CHECK(g >= 0 && static_cast<size_t>(g) < declared.size() &&
                    *own.schema().arguments()[j].real_type() == *declared[g].real_type(),
                "cukiln native hot path: ", name, ": its argument ", j, " is not ", state.name, "'s argument ", g);
    s->given.push_back(static_cast<size_t>(g));
  }
  Specialized* kept = s.get();
  {
    static auto* all = new std::vector<std::unique_ptr<Specialized>>();  // never destroyed, as the registry
    std::lock_guard<std::mutex> guard(registry_lock);
    all->push_back(std::move(s));
  }
  library(c10::DispatchKey::CUDA)
      .impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<SpecializedHot>(kept)));
  library(c10::DispatchKey::Autograd)
      .impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<SpecializedGate>(kept)));
}

// A variant of op ``handle`` for public calls that give ``extra`` output tensors (appended to its arguments):
// its own plans, made by ``miss(*arguments, *outputs)``. Its handle, for ``call``.
int64_t register_variant(int64_t handle, const std::string& suffix, py::object miss, size_t extra) {
  const OpState& base = *reinterpret_cast<OpState*>(handle);
  py::object autograd = base.autograd;
  if (OpState* existing = reregistered(base.name + suffix, miss, autograd, nullptr, nullptr))
    return reinterpret_cast<int64_t>(existing);
  auto state = std::make_unique<OpState>(base.op);
  state->name = base.name + suffix;
  state->miss = std::move(miss);
  state->autograd = base.autograd;
  state->per_call = base.per_call;
  state->per_call.resize(base.per_call.size() + extra, false);
  state->grad_refused = base.grad_refused;
  state->grad_refused.resize(base.grad_refused.size() + extra, true);  // an output given
  state->extra = extra;
  state->variant = true;
  OpState* variant = state.get();
  std::lock_guard<std::mutex> guard(registry_lock);
  registry()[state->name] = std::move(state);
  return reinterpret_cast<int64_t>(variant);
}

// The op of a handle (register_op's or register_variant's) on its arguments, straight into its hot kernel: no
// dispatcher, no gate. For the public calls; arguments are taken as the schema types them (a float argument also
// takes an int, a bool one any truth value), a variant's extra ones as tensors. A call that autograd would have to
// see (grad mode on, a tensor of grad_refused requiring grad) returns NotImplemented before anything runs: the
// caller's Python code refuses it or takes it through autograd, with no Python test of each tensor on every call. A
// builtin function per handle (caller() below), called with the arguments themselves: no tuple, no pybind argument
// parsing.
PyObject* fast_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  STAGE_START();
  OpState& state = *static_cast<OpState*>(PyLong_AsVoidPtr(self));
  const auto& schema = state.op.schema();
  const auto& declared = schema.arguments();
  const size_t count = declared.size() + state.extra;
  TORCH_CHECK_TYPE(static_cast<size_t>(nargs) == count, state.name, ": expected ", count, " arguments, got ", nargs);
  const bool grad_mode = c10::GradMode::is_enabled();
  torch::jit::Stack stack;
  stack.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    PyObject* a = args[i];
    const bool own = i < declared.size();
    const c10::TypeKind kind = own ? state.kinds[i] : c10::TypeKind::TensorType;
    // the schema's type first: a tensor test fails slowly on a number (a Python isinstance), so scalars are told by
    // their own C checks; a tensor where a scalar is declared still becomes a tensor (below), as the key expects
    if (a == Py_None) {
      TORCH_CHECK_TYPE(own, state.name, ": output ", i - declared.size(), " is None");
      stack.emplace_back();
    } else if (kind == c10::TypeKind::TensorType && THPVariable_Check(a)) {
      const at::Tensor& t = THPVariable_Unpack(a);
      if (grad_mode && state.grad_refused[i] && t.requires_grad()) Py_RETURN_NOTIMPLEMENTED;
      stack.emplace_back(t);
    } else if (!own) {
      TORCH_CHECK_TYPE(false, state.name, ": output ", i - declared.size(), " is not a tensor");
    } else if (kind == c10::TypeKind::FloatType && (PyFloat_Check(a) || PyLong_Check(a))) {
      const double value = PyFloat_AsDouble(a);
      if (value == -1.0 && PyErr_Occurred()) throw python_error();  // an int beyond a double: OverflowError
      stack.emplace_back(value);
    } else if (kind == c10::TypeKind::BoolType && (PyBool_Check(a) || !THPVariable_Check(a))) {
      const int value = PyObject_IsTrue(a);
      if (value < 0) throw python_error();
      stack.emplace_back(value != 0);
    } else if (kind == c10::TypeKind::IntType && PyLong_Check(a) && !PyBool_Check(a)) {
      const long long value = PyLong_AsLongLong(a);
      if (value == -1 && PyErr_Occurred()) throw python_error();  // beyond int64: OverflowError
      stack.emplace_back(static_cast<int64_t>(value));
    } else if (kind == c10::TypeKind::StringType && PyUnicode_Check(a)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(a, &size);
      if (text == nullptr) throw python_error();
      stack.emplace_back(std::string(text, static_cast<size_t>(size)));
    } else if (kind == c10::TypeKind::ListType && (PyList_Check(a) || PyTuple_Check(a))) {
      stack.push_back(torch::jit::toIValue(py::handle(a), declared[i].type()));
    } else if (THPVariable_Check(a)) {
      stack.emplace_back(THPVariable_Unpack(a));
    } else {
      // not of the schema's type (an int given for a tensor, say): kept as the Python object, which no key covers,
      // so the op's Python kernel gets it as given and raises the error that explains it
      stack.push_back(torch::jit::toIValue(py::handle(a), c10::PyObjectType::get()));
    }
  }
  STAGE(state, 0);
  run_hot(state, state.op, &stack);
  const size_t returned = schema.returns().size();
  py::object result = py::none();
  if (returned == 1) {
    result = torch::jit::toPyObject(std::move(stack[0]));
  } else if (returned > 1) {
    py::tuple out(returned);
    for (size_t i = 0; i < returned; ++i) out[i] = torch::jit::toPyObject(std::move(stack[i]));
    result = std::move(out);
  }
  STAGE(state, 8);
  return result.release().ptr();
  END_HANDLE_TH_ERRORS
}

PyMethodDef fast_call_method = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_call)),
                                METH_FASTCALL, "the op of this handle on its arguments, through its hot kernel"};

py::object caller(int64_t handle) {
  py::object self = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(reinterpret_cast<void*>(handle)));
  return py::reinterpret_steal<py::object>(PyCFunction_NewEx(&fast_call_method, self.ptr(), nullptr));
}

void clear() {
  std::vector<std::unordered_map<std::string, std::shared_ptr<Plan>>> dropped;  // destroyed after unlocking
  {
    std::lock_guard<std::mutex> guard(registry_lock);
    generation.fetch_add(1);
    for (auto& [name, state] : registry()) {
      std::lock_guard<std::mutex> op_guard(state->lock);
      dropped.emplace_back();
      std::swap(dropped.back(), state->plans);
    }
  }
}

// A variant's or op's stage totals (ns) and the hits they cover, zeroed: a timers build's only (empty elsewhere).
py::tuple take_stage_times(const std::string& name) {
  std::lock_guard<std::mutex> guard(registry_lock);
  auto found = registry().find("cukiln::" + name);
  TORCH_CHECK(found != registry().end(), "cukiln native hot path: no op or variant cukiln::", name);
  OpState& state = *found->second;
  py::list totals;
#ifdef CUKILN_HOT_PATH_TIMERS
  for (int64_t ns : state.stage_ns) totals.append(ns);
#endif
  py::tuple answer = py::make_tuple(totals, state.stage_calls);
  state.stage_ns.fill(0);
  state.stage_calls = 0;
  return answer;
}

size_t plan_count(const std::string& name) {
  std::lock_guard<std::mutex> guard(registry_lock);
  auto found = registry().find("cukiln::" + name);
  if (found == registry().end()) return 0;
  std::lock_guard<std::mutex> op_guard(found->second->lock);
  return found->second->plans.size();
}

int64_t python_count(const std::string& name) {
  std::lock_guard<std::mutex> guard(registry_lock);
  auto found = registry().find("cukiln::" + name);
  return found == registry().end() ? 0 : found->second->python_calls.load();
}

// The calls the Python kernels of every op and variant served, together.
int64_t python_total() {
  std::lock_guard<std::mutex> guard(registry_lock);
  int64_t total = 0;
  for (const auto& entry : registry()) total += entry.second->python_calls.load();
  return total;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cukiln's native hot path for its torch ops (see hot_path.cpp)";
  m.def("register_op", &register_op, "C++ kernels for cukiln::NAME at the CUDA and Autograd keys: its handle");
  m.def("caller", &caller, "the op of a handle as a function of its arguments, through its hot kernel");
  m.def("register_variant", &register_variant, "a variant of an op for calls that give their outputs: its handle");
  m.def("register_specialized", &register_specialized,
        "C++ kernels for cukiln::NAME, an op specialized to constant arguments of the op of a handle");
  m.def("clear", &clear, "forget every cached plan");
  m.def("plan_count", &plan_count, "the cached plans of cukiln::NAME");
  m.def("python_count", &python_count, "the calls of cukiln::NAME its Python kernel served");
  m.def("python_total", &python_total, "the calls the Python kernels of every op and variant served");
  m.def("take_stage_times", &take_stage_times,
        "(ns per stage, hits) of cukiln::NAME (an op or NAME#variant) since the last take; a timers build's only");
  m.attr("stage_timers") = py::bool_(
#ifdef CUKILN_HOT_PATH_TIMERS
      true
#else
      false
#endif
  );
  m.def("check_description",
        [](const py::object& d, size_t count, size_t returned, bool variant) { plan_of(d, count, returned, variant); },
        py::arg("description"), py::arg("count"), py::arg("returned"), py::arg("variant") = false,
        "parse a description as a miss does, raising where it would not be kept (for tests)");
}
