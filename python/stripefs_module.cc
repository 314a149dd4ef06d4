// SPDX-License-Identifier: Apache-2.0
// The Python module `stripefs`: the object API (api/include/stripefs/objects.h)
// for Python programs: in-process, or through the daemon of the pool's mount.
//
//   pool = stripefs.Pool.open("/srv/pool/meta")
//   pool.put("kv/layer0/chunk7", tensor)          # any bytes-like object
//   n = pool.get_into("kv/layer0/chunk7", out)   # into a writable buffer
//
// Every call releases the GIL while it does I/O. Data goes straight between
// the caller's buffer and the pool: put reads the caller's memory in place,
// get and read fill a new bytes object, get_into and read_into the caller's
// writable buffer, with no copy in between. Errors from the pool raise
// OSError with its errno, so ENOENT arrives as FileNotFoundError.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "stripefs/objects.h"

namespace py = pybind11;
using stripefs::api::Error;
using stripefs::api::ObjectPool;

namespace {

// OSError(errno, message[, name]): Python picks the subclass that errno
// names, and shows the name as an OSError's filename.
[[noreturn]] void Raise(const Error& e, const std::string& name = "") {
  py::tuple args = name.empty() ? py::make_tuple(e.code, e.message) : py::make_tuple(e.code, e.message, name);
  PyErr_SetObject(PyExc_OSError, args.ptr());
  throw py::error_already_set();
}

// A contiguous view of a bytes-like object, held while the GIL is released
// (the view keeps the object alive and, for a writable one, its memory in place).
class Buffer {
 public:
  Buffer(py::handle obj, bool writable) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
      throw py::error_already_set();
    }
  }
  ~Buffer() { PyBuffer_Release(&view_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(view_.buf), static_cast<size_t>(view_.len)}; }
  std::span<char> writable() const { return {static_cast<char*>(view_.buf), static_cast<size_t>(view_.len)}; }

 private:
  Py_buffer view_{};
};

// An I/O buffer (ObjectPool::alloc_buffer) as a Python object with the
// buffer protocol: memoryview(b), numpy.frombuffer(b, dtype) and get_into(name, b)
// see its memory, which the mount's daemon fills directly.
struct SharedBuffer {
  std::unique_ptr<stripefs::api::IoBuffer> buffer;
};

class Pool {
 public:
  static std::unique_ptr<Pool> Open(const std::string& meta_dir, const std::string& ram_cache, uint64_t ram_cache_bytes,
                                    bool sync_writes, bool write_back, uint64_t write_back_bytes,
                                    uint32_t write_back_interval_ms, const std::string& channel_socket) {
    stripefs::api::Options o;
    o.ram_cache = ram_cache;
    o.ram_cache_bytes = ram_cache_bytes;
    o.sync_writes = sync_writes;
    o.write_back = write_back;
    o.write_back_bytes = write_back_bytes;
    o.write_back_interval_ms = write_back_interval_ms;
    o.channel_socket = channel_socket;
    Error err;
    std::unique_ptr<ObjectPool> pool;
    {
      py::gil_scoped_release nogil;
      pool = ObjectPool::Open(meta_dir, o, &err);
    }
    if (!pool) Raise(err, meta_dir);
    return std::make_unique<Pool>(std::move(pool), meta_dir);
  }

  Pool(std::unique_ptr<ObjectPool> pool, std::string meta_dir)
      : pool_(std::move(pool)), meta_dir_(std::move(meta_dir)), path_(pool_->path()) {}
  ~Pool() { close(); }

  // Stores what a put left in memory and closes the pool, once every call
  // in progress has returned; a second close does nothing. A failure to
  // store is only logged here, so sync() first reports it.
  void close() {
    py::gil_scoped_release nogil;  // calls in other threads hold mu_ and need the GIL to finish
    std::unique_lock lock(mu_);
    pool_.reset();
  }

  std::string put(const std::string& name, py::handle data) {
    Buffer in(data, /*writable=*/false);
    std::string uri;
    check(with_pool([&](ObjectPool& p) { return p.put(name, in.bytes(), &uri); }), name);
    return uri;
  }

  void append(const std::string& name, py::handle data) {
    Buffer in(data, /*writable=*/false);
    check(with_pool([&](ObjectPool& p) { return p.append(name, in.bytes()); }), name);
  }

  py::object get(const std::string& name) { return read_bytes(name, 0, UINT64_MAX, /*none_if_missing=*/false); }

  py::object read(const std::string& name, uint64_t offset, uint64_t length) {
    return read_bytes(name, offset, length, /*none_if_missing=*/false);
  }

  // The whole object into buffer, which must hold it; its size. (One call:
  // a buffer too small holds the object's first bytes when this raises.)
  size_t get_into(const std::string& name, py::handle buffer) {
    Buffer out(buffer, /*writable=*/true);
    size_t got = 0;
    uint64_t size = 0;
    check(with_pool([&](ObjectPool& p) { return p.read_into(name, 0, out.writable(), &got, &size); }), name);
    if (size > out.writable().size()) {
      throw py::value_error(name + " is " + std::to_string(size) + " bytes; the buffer holds " +
                            std::to_string(out.writable().size()));
    }
    return got;
  }

  // Up to len(buffer) bytes from offset into buffer; how many.
  size_t read_into(const std::string& name, uint64_t offset, py::handle buffer) {
    Buffer out(buffer, /*writable=*/true);
    size_t got = 0;
    check(with_pool([&](ObjectPool& p) { return p.read_into(name, offset, out.writable(), &got); }), name);
    return got;
  }

  uint64_t size(const std::string& name) {
    uint64_t size = 0;
    check(with_pool([&](ObjectPool& p) { return p.size(name, &size); }), name);
    return size;
  }

  // Each object's bytes, or None for a name with no object; any other error raises.
  py::list multi_get(const std::vector<std::string>& names) {
    py::list out;
    for (const std::string& name : names) out.append(read_bytes(name, 0, UINT64_MAX, /*none_if_missing=*/true));
    return out;
  }

  void remove(const std::string& name) {
    check(with_pool([&](ObjectPool& p) { return p.remove(name); }), name);
  }

  std::vector<std::string> list(const std::string& dir) {
    std::vector<std::string> names;
    check(with_pool([&](ObjectPool& p) { return p.list(dir, &names); }), dir);
    return names;
  }

  SharedBuffer buffer(size_t size) {
    SharedBuffer b;
    Error e = with_pool([&](ObjectPool& p) {
      Error err;
      b.buffer = p.alloc_buffer(size, &err);
      return err;
    });
    check(e);
    return b;
  }

  void sync() {
    check(with_pool([&](ObjectPool& p) { return p.sync(); }));
  }

  py::dict stats() {
    stripefs::api::Stats s;
    check(with_pool([&](ObjectPool& p) { return s = p.stats(), Error{}; }));
    py::dict d;
    d["gets"] = s.gets, d["puts"] = s.puts, d["appends"] = s.appends, d["removes"] = s.removes;
    d["not_found"] = s.not_found, d["bytes_read"] = s.bytes_read, d["bytes_written"] = s.bytes_written;
    d["cache_hits"] = s.cache_hits, d["cache_misses"] = s.cache_misses, d["cache_evictions"] = s.cache_evictions;
    d["cache_bytes"] = s.cache_bytes, d["cache_capacity"] = s.cache_capacity;
    d["dirty_bytes"] = s.dirty_bytes, d["dirty_objects"] = s.dirty_objects;
    return d;
  }

  bool closed() {
    std::shared_lock lock(mu_);
    return pool_ == nullptr;
  }
  const std::string& meta_dir() const { return meta_dir_; }
  const std::string& path() const { return path_; }

 private:
  // Runs fn on the pool without the GIL; a closed pool raises ValueError, as
  // a closed file does.
  template <typename Fn>
  Error with_pool(Fn fn) {
    py::gil_scoped_release nogil;
    std::shared_lock lock(mu_);
    if (!pool_) throw py::value_error("I/O on a closed stripefs pool (" + meta_dir_ + ")");
    return fn(*pool_);
  }

  static void check(const Error& e, const std::string& name = "") {
    if (e) Raise(e, name);
  }

  // Up to length bytes from offset, in a bytes object made to their size
  // and filled in place; None, when none_if_missing, for a name with no object.
  py::object read_bytes(const std::string& name, uint64_t offset, uint64_t length, bool none_if_missing) {
    auto fail = [&](const Error& e) -> py::object {
      if (e.code == ENOENT && none_if_missing) return py::none();
      Raise(e, name);
    };
    uint64_t size = 0;
    if (Error e = with_pool([&](ObjectPool& p) { return p.size(name, &size); })) return fail(e);
    const uint64_t n = offset >= size ? 0 : std::min(length, size - offset);
    PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
    if (!out) throw py::error_already_set();
    py::object owned = py::reinterpret_steal<py::object>(out);
    // The bytes object is new and not shared yet, so its memory may be
    // filled without the GIL.
    const std::span<char> into(PyBytes_AS_STRING(out), n);
    size_t got = 0;
    if (Error e = with_pool([&](ObjectPool& p) { return p.read_into(name, offset, into, &got); })) return fail(e);
    if (got < n) {  // replaced by a shorter object between the two calls
      owned.release();
      if (_PyBytes_Resize(&out, static_cast<Py_ssize_t>(got)) != 0) throw py::error_already_set();
      owned = py::reinterpret_steal<py::object>(out);
    }
    return owned;
  }

  std::shared_mutex mu_;  // shared by every call in progress, exclusive while closing
  std::unique_ptr<ObjectPool> pool_;
  const std::string meta_dir_;
  const std::string path_;  // "in-process" or "daemon"
};

}  // namespace

PYBIND11_MODULE(stripefs, m) {
  m.doc() = "stripefs objects from Python: put, get and read objects of a pool, in-process or through the "
            "daemon of its mount, with the GIL released around I/O";
  py::class_<SharedBuffer>(m, "Buffer", py::buffer_protocol(),
                           "Memory that get_into and read_into fill without a copy in this process (from "
                           "Pool.buffer); use it through memoryview or numpy.frombuffer.")
      .def_buffer([](SharedBuffer& b) {
        const std::span<char> s = b.buffer->span();
        return py::buffer_info(s.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(s.size())}, {1}, /*readonly=*/false);
      })
      .def("__len__", [](SharedBuffer& b) { return b.buffer->span().size(); });
  py::class_<Pool>(m, "Pool", "An open stripefs pool; thread-safe. Use Pool.open().")
      .def_static("open", &Pool::Open, py::arg("meta_dir"), py::kw_only(), py::arg("ram_cache") = "s3fifo",
                  py::arg("ram_cache_bytes") = 0, py::arg("sync_writes") = false, py::arg("write_back") = true,
                  py::arg("write_back_bytes") = 0, py::arg("write_back_interval_ms") = 1000,
                  py::arg("channel_socket") = "",
                  "Opens the pool whose metadata directory is meta_dir: through its mount's daemon when it is "
                  "mounted, else in-process (OSError when it cannot).")
      .def("put", &Pool::put, py::arg("name"), py::arg("data"),
           "Creates or replaces the object from any bytes-like data; returns its stripefs:// URI.")
      .def("append", &Pool::append, py::arg("name"), py::arg("data"), "Adds data at the end of the object.")
      .def("get", &Pool::get, py::arg("name"), "The whole object, as bytes.")
      .def("read", &Pool::read, py::arg("name"), py::arg("offset"), py::arg("length"),
           "Up to length bytes from offset, as bytes (fewer at the end).")
      .def("get_into", &Pool::get_into, py::arg("name"), py::arg("buffer"),
           "The whole object into a writable buffer that holds it; returns its size.")
      .def("read_into", &Pool::read_into, py::arg("name"), py::arg("offset"), py::arg("buffer"),
           "Up to len(buffer) bytes from offset into a writable buffer; returns how many.")
      .def("size", &Pool::size, py::arg("name"), "The object's size in bytes.")
      .def("multi_get", &Pool::multi_get, py::arg("names"),
           "The bytes of each object, or None for a name with no object.")
      .def("remove", &Pool::remove, py::arg("name"))
      .def("list", &Pool::list, py::arg("dir") = "", "The names in a directory of the pool, sorted.")
      .def("buffer", &Pool::buffer, py::arg("size"),
           "A Buffer of size bytes that get_into and read_into fill without a copy in this process: through "
           "a mount's daemon it is memory shared with the daemon (allocate few, and reuse them).")
      .def("sync", &Pool::sync, "Makes everything written so far durable.")
      .def("stats", &Pool::stats, "Counters of this open pool, as a dict.")
      .def("close", &Pool::close,
           "Stores what is buffered and closes the pool; call sync() first to see a failure to store.")
      .def_property_readonly("closed", &Pool::closed)
      .def_property_readonly("meta_dir", &Pool::meta_dir)
      .def_property_readonly("path", &Pool::path,
                             "How this pool is reached: 'in-process' (its metadata store opened here) or 'daemon' "
                             "(a mounted pool, through its daemon's object channel).")
      .def("__enter__", [](Pool& p) -> Pool& { return p; }, py::return_value_policy::reference)
      .def("__exit__", [](Pool& p, py::args) { p.close(); });
}
