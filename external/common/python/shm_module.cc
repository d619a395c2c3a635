// _cais_shm: the harness's end of the shared-memory channel (cais/shm_channel.h) as a CPython
// extension, loaded by harness/cosim/shm_lib.py from beside cais-engine. Built against the
// stable ABI (3.10+), so one build serves any Python of the venv. One call per message: the
// lock-step loop makes a few per window, so call overhead matters (ctypes costs ~1 µs a call).
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>
#include <memory>
#include <vector>

#include "cais/shm_channel.h"

using cais::shm::FrameView;
using cais::shm::HarnessHub;
using cais::shm::RingReader;

namespace {

constexpr const char* kCapsule = "cais.shm.HarnessHub";

// What the capsule holds: close() empties it before the capsule itself goes away.
struct Handle {
  std::unique_ptr<HarnessHub> hub;
};

void destroy_capsule(PyObject* capsule) { delete static_cast<Handle*>(PyCapsule_GetPointer(capsule, kCapsule)); }

HarnessHub* hub_of(PyObject* capsule) {
  auto* h = static_cast<Handle*>(PyCapsule_GetPointer(capsule, kCapsule));
  if (h == nullptr) return nullptr;  // not our capsule: error set
  if (!h->hub) PyErr_SetString(PyExc_ValueError, "shared-memory hub is closed");
  return h->hub.get();
}

bool check_args(Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, nargs);
  return false;
}

// create(engines, ring_bytes[, peer_ring_bytes]) -> hub
PyObject* create(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 && !check_args(nargs, 3, "create")) return nullptr;
  const unsigned long engines = PyLong_AsUnsignedLong(args[0]);
  const unsigned long long ring = PyLong_AsUnsignedLongLong(args[1]);
  const unsigned long long peer_ring = nargs == 3 ? PyLong_AsUnsignedLongLong(args[2]) : 0;
  if (PyErr_Occurred()) return nullptr;
  try {
    auto* h = new Handle{std::make_unique<HarnessHub>(static_cast<std::uint32_t>(engines), ring, peer_ring)};
    PyObject* capsule = PyCapsule_New(h, kCapsule, destroy_capsule);
    if (capsule == nullptr) delete h;
    return capsule;
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_OSError, "cannot create the shared-memory channel: %s", e.what());
    return nullptr;
  }
}

// close(hub): unmaps the segment and closes its fd now (the engines keep their mappings).
PyObject* close_hub(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_args(nargs, 1, "close")) return nullptr;
  auto* h = static_cast<Handle*>(PyCapsule_GetPointer(args[0], kCapsule));
  if (h == nullptr) return nullptr;
  h->hub.reset();
  Py_RETURN_NONE;
}

// fd(hub) -> the segment's file descriptor (close-on-exec; hand it to engines with pass_fds).
PyObject* fd(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_args(nargs, 1, "fd")) return nullptr;
  HarnessHub* hub = hub_of(args[0]);
  return hub ? PyLong_FromLong(hub->fd()) : nullptr;
}

bool view_of(PyObject* obj, FrameView* out) {
  char* data;
  Py_ssize_t size;
  if (PyBytes_AsStringAndSize(obj, &data, &size) != 0) return false;
  *out = {data, static_cast<std::size_t>(size)};
  return true;
}

// send(hub, engine, control: bytes[, frames: list[bytes] | None]): queues one message, never blocks.
PyObject* send(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 && !check_args(nargs, 4, "send")) return nullptr;
  HarnessHub* hub = hub_of(args[0]);
  if (hub == nullptr) return nullptr;
  const unsigned long engine = PyLong_AsUnsignedLong(args[1]);
  if (PyErr_Occurred()) return nullptr;
  if (engine >= hub->engines()) {
    PyErr_Format(PyExc_IndexError, "no engine slot %lu", engine);
    return nullptr;
  }
  thread_local std::vector<FrameView> frames;
  frames.resize(1);
  if (!view_of(args[2], &frames[0])) return nullptr;
  if (nargs == 4 && args[3] != Py_None) {
    if (!PyList_Check(args[3])) {
      PyErr_SetString(PyExc_TypeError, "frames must be a list of bytes or None");
      return nullptr;
    }
    const Py_ssize_t n = PyList_Size(args[3]);
    frames.resize(1 + static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!view_of(PyList_GetItem(args[3], i), &frames[1 + i])) return nullptr;
  }
  try {
    hub->send(static_cast<std::uint32_t>(engine), frames.data(), frames.size());
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  Py_RETURN_NONE;
}

// send_many(hub, [(engine, control), ...]): queues every message, then wakes the engines that
// sleep. (Waking one lets it take this core at once; the others must have their message by then.)
PyObject* send_many(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_args(nargs, 2, "send_many")) return nullptr;
  HarnessHub* hub = hub_of(args[0]);
  if (hub == nullptr) return nullptr;
  if (!PyList_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "messages must be a list of (engine, control) tuples");
    return nullptr;
  }
  const Py_ssize_t n = PyList_Size(args[1]);
  thread_local std::vector<std::uint32_t> engines;
  engines.clear();
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GetItem(args[1], i);
    if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
      PyErr_SetString(PyExc_TypeError, "messages must be a list of (engine, control) tuples");
      return nullptr;
    }
    const unsigned long engine = PyLong_AsUnsignedLong(PyTuple_GetItem(item, 0));
    if (PyErr_Occurred()) return nullptr;
    if (engine >= hub->engines()) {
      PyErr_Format(PyExc_IndexError, "no engine slot %lu", engine);
      return nullptr;
    }
    FrameView control;
    if (!view_of(PyTuple_GetItem(item, 1), &control)) return nullptr;
    try {
      hub->send(static_cast<std::uint32_t>(engine), &control, 1, false);
    } catch (const std::bad_alloc&) {
      return PyErr_NoMemory();
    }
    engines.push_back(static_cast<std::uint32_t>(engine));
  }
  for (const std::uint32_t e : engines) hub->wake(e);
  Py_RETURN_NONE;
}

// recv(hub, spin_ns, max_ns) -> None after max_ns, (engine, control, [frames]) for a message,
// or (engine, None, reason) for bytes that are not a message. Spins, then sleeps without the GIL.
PyObject* recv(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_args(nargs, 3, "recv")) return nullptr;
  HarnessHub* hub = hub_of(args[0]);
  if (hub == nullptr) return nullptr;
  const long long spin_ns = PyLong_AsLongLong(args[1]);
  const long long max_ns = PyLong_AsLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  std::uint32_t engine = 0;
  RingReader::Status st;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    st = hub->wait_any(spin_ns, max_ns, &engine);
  } catch (const std::exception&) {
    st = RingReader::kBad;
  }
  PyEval_RestoreThread(ts);
  if (st == RingReader::kNothing) Py_RETURN_NONE;
  if (st == RingReader::kBad) {
    const std::string& why = hub->reader(engine).error();
    return Py_BuildValue("(kOs)", static_cast<unsigned long>(engine), Py_None,
                         why.empty() ? "message too large to hold" : why.c_str());
  }
  const auto& frames = hub->reader(engine).frames();
  PyObject* control = PyBytes_FromStringAndSize(frames[0].data, static_cast<Py_ssize_t>(frames[0].size));
  PyObject* rest = PyList_New(static_cast<Py_ssize_t>(frames.size() - 1));
  PyObject* idx = PyLong_FromUnsignedLong(engine);
  if (control == nullptr || rest == nullptr || idx == nullptr) {
    Py_XDECREF(control);
    Py_XDECREF(rest);
    Py_XDECREF(idx);
    return nullptr;
  }
  for (std::size_t i = 1; i < frames.size(); ++i) {
    PyObject* b = PyBytes_FromStringAndSize(frames[i].data, static_cast<Py_ssize_t>(frames[i].size));
    if (b == nullptr) {
      Py_DECREF(control);
      Py_DECREF(rest);
      Py_DECREF(idx);
      return nullptr;
    }
    PyList_SetItem(rest, static_cast<Py_ssize_t>(i - 1), b);  // steals b
  }
  PyObject* out = PyTuple_New(3);
  if (out == nullptr) {
    Py_DECREF(control);
    Py_DECREF(rest);
    Py_DECREF(idx);
    return nullptr;
  }
  PyTuple_SetItem(out, 0, idx);
  PyTuple_SetItem(out, 1, control);
  PyTuple_SetItem(out, 2, rest);
  return out;
}

PyMethodDef kMethods[] = {
    {"create", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(create)), METH_FASTCALL,
     "create(engines, ring_bytes[, peer_ring_bytes]) -> hub"},
    {"close", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(close_hub)), METH_FASTCALL,
     "close(hub)"},
    {"fd", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fd)), METH_FASTCALL, "fd(hub) -> int"},
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(send)), METH_FASTCALL,
     "send(hub, engine, control[, frames_or_None])"},
    {"send_many", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(send_many)), METH_FASTCALL,
     "send_many(hub, [(engine, control), ...]): every message first, then the wake-ups"},
    {"recv", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(recv)), METH_FASTCALL,
     "recv(hub, spin_ns, max_ns) -> None | (engine, control, frames) | (engine, None, reason)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_cais_shm", "Shared-memory channel to the engines.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__cais_shm() { return PyModule_Create(&kModule); }
