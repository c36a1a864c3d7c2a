// SPDX-License-Identifier: GPL-2.0
// A thin C++ layer over bsp.h: RAII registration, puts/gets/sends over
// spans, and the message queue as a range. It adds no state of its own: the
// runtime (libghost-bsp) keeps everything, so VPs still migrate.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "bsp.h"

namespace ghost::bsp {

inline int pid() {
    return bsp_pid();
}
inline int nprocs() {
    return bsp_nprocs();
}
inline void sync() {
    bsp_sync();
}

// Registers an area for the life of the object (collective: every process
// makes the same registrations in the same order); pops it on destruction.
// Both take effect at the next sync, as bsp_push_reg/bsp_pop_reg do.
class Registration {
  public:
    template <class T, std::size_t N>
    explicit Registration(std::span<T, N> area)
        : addr_(area.data()), bytes_(static_cast<int>(area.size_bytes())) {
        bsp_push_reg(addr_, bytes_);
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    Registration(Registration&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), bytes_(o.bytes_) {}
    ~Registration() {
        if (addr_)
            bsp_pop_reg(addr_);
    }
    const void* address() const { return addr_; }
    int size() const { return bytes_; }

  private:
    const void* addr_;
    int bytes_;
};

// Writes src into dst (a registered area of this process, named by its
// address here) at element offset on process to, at the next sync. src is
// copied now.
template <class T> void put(int to, std::span<const T> src, T* dst, std::size_t offset = 0) {
    bsp_put(to, src.data(), dst, static_cast<int>(offset * sizeof(T)),
            static_cast<int>(src.size_bytes()));
}

// As put, but src is read at the sync (it must not change until then).
template <class T> void hpput(int to, std::span<const T> src, T* dst, std::size_t offset = 0) {
    bsp_hpput(to, src.data(), dst, static_cast<int>(offset * sizeof(T)),
              static_cast<int>(src.size_bytes()));
}

// Reads dst.size() elements of src (registered) at element offset on
// process from, at the start of the next sync.
template <class T> void get(int from, const T* src, std::size_t offset, std::span<T> dst) {
    bsp_get(from, src, static_cast<int>(offset * sizeof(T)), dst.data(),
            static_cast<int>(dst.size_bytes()));
}

// Sends payload with tag (the current tag size's bytes of it) to process to.
inline void send(int to, std::span<const std::byte> tag, std::span<const std::byte> payload) {
    bsp_send(to, tag.data(), payload.data(), static_cast<int>(payload.size()));
}

// One received message: views into the runtime's buffer, valid until the
// next sync.
struct Message {
    std::span<const std::byte> tag;
    std::span<const std::byte> payload;
};

// The messages of the last superstep, consumed as they are iterated
// (bsp_hpmove): for (Message m : ghost::bsp::Messages()) ...
class Messages {
  public:
    class iterator {
      public:
        using value_type = Message;
        using difference_type = std::ptrdiff_t;
        iterator() = default;
        explicit iterator(int tagsize) : tagsize_(tagsize) { next(); }
        const Message& operator*() const { return cur_; }
        const Message* operator->() const { return &cur_; }
        iterator& operator++() {
            next();
            return *this;
        }
        void operator++(int) { next(); }
        bool operator==(const iterator& o) const { return done_ == o.done_; }

      private:
        void next() {
            void *tag = nullptr, *payload = nullptr;
            const int n = bsp_hpmove(&tag, &payload);
            done_ = n < 0;
            if (!done_)
                cur_ = {{static_cast<const std::byte*>(tag), static_cast<std::size_t>(tagsize_)},
                        {static_cast<const std::byte*>(payload), static_cast<std::size_t>(n)}};
        }
        int tagsize_ = 0;
        bool done_ = true;
        Message cur_;
    };
    // tagsize: the tag size the messages were sent with.
    explicit Messages(int tagsize = 0) : tagsize_(tagsize) {}
    iterator begin() const { return iterator(tagsize_); }
    iterator end() const { return iterator(); }

  private:
    int tagsize_;
};

} // namespace ghost::bsp
