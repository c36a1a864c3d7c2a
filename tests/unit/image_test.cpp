// SPDX-License-Identifier: GPL-2.0
// The user-space image reader and writer (libghost/include/ghost/image.hpp):
// round trips, one rejection per validation rule, truncation at every
// offset, the checksum, page data delivery, the byte sources, and the real
// images of the fuzz corpus.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <linux/ghost.h>

#include "ghost/fd.hpp"
#include "ghost/image.hpp"

namespace {

namespace img = ghost::image;
using Bytes = std::vector<std::byte>;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kUserEnd = (1ULL << 47) - kPage;

template <class T> std::span<const std::byte> rec_bytes(const T& v) {
    return std::as_bytes(std::span(&v, 1));
}

std::span<const std::byte> str_bytes(std::string_view s) {
    return std::as_bytes(std::span(s));
}

template <class T> void put(Bytes& b, std::size_t off, const T& v) {
    std::memcpy(b.data() + off, &v, sizeof(v));
}

template <class T> T get(const Bytes& b, std::size_t off) {
    T v;
    std::memcpy(&v, b.data() + off, sizeof(v));
    return v;
}

// Distinct, recomputable contents for the page at @addr.
Bytes pattern(std::uint64_t addr, std::uint64_t nr_pages) {
    Bytes b(nr_pages * kPage);
    for (std::size_t i = 0; i < b.size(); i++)
        b[i] = static_cast<std::byte>(((addr + i) / kPage) * 131 + i * 7);
    return b;
}

// ---- a synthetic image, valid -------------------------------------------------

img::Image synthetic() {
    img::Image m;
    m.header.magic = GHOST_IMAGE_MAGIC;
    m.header.version = GHOST_IMAGE_VERSION;
    m.header.header_size = sizeof(ghost_image_header);
    m.header.arch = GHOST_ARCH_X86_64;
    m.header.page_size = 4096;
    m.header.time_ns = 123456789;
    m.header.pid = 42;
    m.header.features = GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VDSO_ID;
    m.header.required_features = GHOST_IMAGE_FEAT_FILE_ID;
    std::strcpy(m.task.comm, "synthetic");
    m.task.rseq = 0x602100;
    m.task.rseq_len = 32;
    m.task.rseq_sig = 0x53053053;
    m.task.clear_child_tid = 0x602200;
    m.task.robust_list = 0x602300;
    m.task.robust_list_len = 24;

    m.regs.cs = 0x33;
    m.regs.ss = 0x2b;
    m.regs.ip = 0x401000;
    m.regs.sp = 0x7fffffffe000;
    m.regs.flags = 0x246;
    m.regs.fs_base = 0x602400;

    m.xstate = {832, 0, 0x7};
    m.xsave.resize(832);
    const std::uint32_t mxcsr = 0x1f80, mxcsr_mask = 0xffff;
    const std::uint64_t xstate_bv = 0x3;
    std::memcpy(m.xsave.data() + 24, &mxcsr, 4);
    std::memcpy(m.xsave.data() + 28, &mxcsr_mask, 4);
    std::memcpy(m.xsave.data() + 512, &xstate_bv, 8);

    auto& usr1 = m.signals.action[SIGUSR1 - 1];
    usr1 = {0x401100, SA_RESTART | SA_SIGINFO | 0x04000000 /* SA_RESTORER */, 0x401200, 0};
    m.signals.blocked = 1ULL << (SIGUSR2 - 1);
    m.signals.pending = 1ULL << (SIGCHLD - 1);
    m.signals.altstack_sp = 0x604000;
    m.signals.altstack_size = 8192;

    m.umask = 022;
    m.cwd = "/tmp/work"; // 9 bytes: the FS section gets padding
    for (auto& r : m.rlimits.rlim)
        r = {~0ULL, ~0ULL};
    m.rlimits.rlim[7] = {1024, 4096}; // RLIMIT_NOFILE

    auto& mm = m.mm;
    mm.start_code = 0x400000;
    mm.end_code = 0x402000;
    mm.start_data = 0x600000;
    mm.end_data = 0x601000;
    mm.start_brk = 0x602000;
    mm.brk = 0x606000;
    mm.start_stack = 0x7fffffffe800;
    mm.arg_start = 0x7fffffffe900;
    mm.arg_end = 0x7fffffffe910;
    mm.env_start = 0x7fffffffe910;
    mm.env_end = 0x7fffffffe920;
    mm.vdso = 0x7ffff7fc1000;
    mm.vdso_size = 0x2000;
    mm.vdso_crc32c = 0x12345678;
    mm.auxv_words = 4;
    mm.auxv[0] = 6; // AT_PAGESZ
    mm.auxv[1] = 4096;

    const auto vma = [&](std::uint64_t start, std::uint64_t end, std::uint32_t prot,
                         std::uint32_t flags, std::string path = {}) -> img::Vma& {
        img::Vma v;
        v.rec.start = start;
        v.rec.end = end;
        v.rec.prot = prot;
        v.rec.flags = flags;
        v.rec.path_len = static_cast<std::uint32_t>(path.size());
        v.path = std::move(path);
        m.vmas.push_back(std::move(v));
        return m.vmas.back();
    };
    const auto run = [](img::Vma& v, std::uint64_t addr, std::uint64_t n) {
        v.runs.push_back({addr, n, 0});
        v.rec.nr_pages += n;
    };
    vma(0x400000, 0x402000, PROT_READ | PROT_EXEC, GHOST_VMA_FILE, "/usr/bin/synthetic");
    auto& data =
        vma(0x600000, 0x601000, PROT_READ | PROT_WRITE, GHOST_VMA_FILE, "/usr/bin/synthetic");
    data.rec.pgoff = 2;
    run(data, 0x600000, 1);
    auto& heap = vma(0x602000, 0x606000, PROT_READ | PROT_WRITE, GHOST_VMA_HEAP);
    run(heap, 0x602000, 2);
    run(heap, 0x605000, 1);
    vma(0x7ffff7fbd000, 0x7ffff7fc1000, PROT_READ, GHOST_VMA_VVAR);
    vma(0x7ffff7fc1000, 0x7ffff7fc3000, PROT_READ | PROT_EXEC, GHOST_VMA_VDSO);
    auto& stack = vma(0x7ffffffdd000, kUserEnd, PROT_READ | PROT_WRITE,
                      GHOST_VMA_GROWSDOWN | GHOST_VMA_STACK);
    run(stack, 0x7fffffffd000, 2);
    mm.nr_vmas = static_cast<std::uint32_t>(m.vmas.size());

    const auto file = [&](int fd, std::uint32_t kind, std::uint32_t flags, std::uint32_t mode,
                          std::string path) -> img::File& {
        img::File f;
        f.rec.fd = fd;
        f.rec.kind = kind;
        f.rec.flags = flags;
        f.rec.mode = mode;
        f.rec.path_len = static_cast<std::uint32_t>(path.size());
        f.rec.file_id = m.files.size() + 1;
        f.path = std::move(path);
        m.files.push_back(std::move(f));
        return m.files.back();
    };
    file(0, GHOST_FILE_INHERIT, O_RDONLY, S_IFIFO, "pipe:[1234]");
    file(1, GHOST_FILE_PATH, O_WRONLY, S_IFCHR, "/dev/null");
    auto& log = file(3, GHOST_FILE_PATH, O_RDWR | O_APPEND, S_IFREG, "/tmp/work/data");
    log.rec.pos = 100;
    log.rec.fd_flags = FD_CLOEXEC;
    return m;
}

// The same image in format version 1: no feature bits, so no file ids and
// no vDSO record.
img::Image version1(img::Image m) {
    m.header.version = 1;
    m.header.features = m.header.required_features = 0;
    m.mm.vdso_size = m.mm.vdso_crc32c = 0;
    for (auto& f : m.files)
        f.rec.file_id = 0;
    return m;
}

// Encodes with pattern() data, whatever the runs say.
Bytes encode(const img::Image& m) {
    Bytes buf;
    return img::encode(m, [&](const img::Vma&, const img::PageRun& r) {
        buf = pattern(r.addr, r.nr_pages);
        return std::span<const std::byte>(buf);
    });
}

// Sections of an image that is well framed: type, offset, payload size.
struct SecAt {
    std::uint32_t type;
    std::size_t at;
    std::uint64_t size;
};

std::vector<SecAt> walk(const Bytes& b) {
    std::vector<SecAt> out;
    std::size_t off = get<std::uint32_t>(b, offsetof(ghost_image_header, header_size));
    while (off + sizeof(ghost_section) <= b.size()) {
        const auto s = get<ghost_section>(b, off);
        out.push_back({s.type, off, s.size});
        if (s.type == GHOST_SEC_END)
            break;
        off += sizeof(s) + (s.size + 7) / 8 * 8;
    }
    return out;
}

SecAt find(const Bytes& b, std::uint32_t type, int nth = 0) {
    for (const auto& s : walk(b))
        if (s.type == type && nth-- == 0)
            return s;
    ADD_FAILURE() << "no section " << type;
    return {};
}

// After a byte-level change: END's checksum made right again. END is the
// last 32 bytes of what the Writer makes (40 with an XXH64), whatever the
// change.
void refresh_crc(Bytes& b) {
    const bool xxh = get<ghost_image_header>(b, 0).features & GHOST_IMAGE_FEAT_XXH64;
    const auto at = b.size() - sizeof(ghost_section) - (xxh ? sizeof(ghost_end) : 16);
    ASSERT_EQ(get<std::uint32_t>(b, at), std::uint32_t{GHOST_SEC_END});
    const auto before = std::span(b).first(at);
    if (xxh)
        put(b, at + sizeof(ghost_section) + offsetof(ghost_end, xxh64), img::xxh64(before));
    else
        put(b, at + sizeof(ghost_section), img::crc32c(0, before));
}

// The synthetic image as a list of sections, to reorder, drop or repeat.
using Piece = std::function<void(img::Writer&)>;

std::vector<Piece> pieces(const img::Image& m) {
    std::vector<Piece> p;
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_TASK, m.task); });
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_REGS, m.regs); });
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_XSTATE, m.xstate, m.xsave); });
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_SIGNALS, m.signals); });
    p.push_back([m](img::Writer& w) {
        const ghost_fs fs{m.umask, static_cast<std::uint32_t>(m.cwd.size())};
        w.record(GHOST_SEC_FS, fs, str_bytes(m.cwd));
    });
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_RLIMITS, m.rlimits); });
    p.push_back([m](img::Writer& w) { w.record(GHOST_SEC_MM, m.mm); });
    for (const auto& v : m.vmas) {
        p.push_back([v](img::Writer& w) { w.record(GHOST_SEC_VMA, v.rec, str_bytes(v.path)); });
        for (const auto& r : v.runs)
            p.push_back([r](img::Writer& w) { w.pages(r.addr, pattern(r.addr, r.nr_pages)); });
    }
    for (const auto& f : m.files)
        p.push_back([f](img::Writer& w) { w.record(GHOST_SEC_FILE, f.rec, str_bytes(f.path)); });
    return p;
}

Bytes build(const img::Image& m, const std::vector<Piece>& ps, bool end = true) {
    img::Writer w;
    w.header(m.header);
    for (const auto& p : ps)
        p(w);
    if (end)
        w.end();
    return std::move(w.bytes());
}

// Index of the first piece of the VMA @i in pieces(m).
std::size_t vma_piece(const img::Image& m, std::size_t i) {
    std::size_t k = 7;
    for (std::size_t j = 0; j < i; j++)
        k += 1 + m.vmas[j].runs.size();
    return k;
}

// What on_pages saw: (vma start, run addr, pages, data) per call.
struct Seen {
    std::uint64_t vma, addr, nr, data_offset;
    Bytes data;
};

img::ReadOptions collect(std::vector<Seen>& seen) {
    img::ReadOptions o;
    o.on_pages = [&seen](const img::Vma& v, const img::PageRun& r,
                         std::span<const std::byte> d) -> ghost::Result<void> {
        seen.push_back({v.rec.start, r.addr, r.nr_pages, r.data_offset, Bytes(d.begin(), d.end())});
        return {};
    };
    return o;
}

// ---- crc32c ----------------------------------------------------------------------

std::uint32_t crc_bitwise(std::span<const std::byte> d) {
    std::uint32_t c = ~0u;
    for (auto b : d) {
        c ^= static_cast<std::uint8_t>(b);
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

TEST(ImageCrc32c, KnownVector) {
    // The CRC-32C check value (RFC 3720 and every crc catalogue).
    EXPECT_EQ(img::crc32c(0, str_bytes("123456789")), 0xE3069283u);
    EXPECT_EQ(img::crc32c_portable(0, str_bytes("123456789")), 0xE3069283u);
    EXPECT_EQ(img::crc32c(0, {}), 0u);
}

TEST(ImageCrc32c, BothImplementationsMatchBitwiseAtEveryLengthAndAlignment) {
    Bytes d(300);
    for (std::size_t i = 0; i < d.size(); i++)
        d[i] = static_cast<std::byte>(i * 37 + 11);
    for (std::size_t start = 0; start < 9; start++)
        for (std::size_t len = 0; start + len <= d.size(); len += 1 + len / 16) {
            const auto s = std::span(d).subspan(start, len);
            const auto want = crc_bitwise(s);
            ASSERT_EQ(img::crc32c(0, s), want) << start << "+" << len;
            ASSERT_EQ(img::crc32c_portable(0, s), want) << start << "+" << len;
        }
}

TEST(ImageCrc32c, LongDataInThreeLanesMatchesTheTables) {
    // crc32c() cuts long data into blocks of three 4 KiB lanes and joins
    // them; around and across block edges it must equal the tables' result.
    Bytes d(5 * 12288 + 100);
    std::uint32_t x = 12345;
    for (auto& b : d) {
        x = x * 1103515245u + 12345u;
        b = static_cast<std::byte>(x >> 24);
    }
    for (std::size_t start : {0ul, 1ul, 3ul, 8ul})
        for (std::size_t len :
             {12287ul, 12288ul, 12289ul, 24575ul, 24576ul, 24583ul, 40000ul, 5 * 12288ul})
            ASSERT_EQ(img::crc32c(7, std::span(d).subspan(start, len)),
                      img::crc32c_portable(7, std::span(d).subspan(start, len)))
                << start << "+" << len;
}

TEST(ImageCrc32c, Chains) {
    const Bytes d = pattern(0x1000, 1);
    const auto whole = img::crc32c(0, d);
    for (std::size_t cut : {0ul, 1ul, 7ul, 8ul, 100ul, 4095ul, 4096ul}) {
        const auto a = std::span(d).first(cut), b = std::span(d).subspan(cut);
        EXPECT_EQ(img::crc32c(img::crc32c(0, a), b), whole) << cut;
        EXPECT_EQ(img::crc32c_portable(img::crc32c_portable(0, a), b), whole) << cut;
    }
}

// ---- valid images ------------------------------------------------------------------

TEST(ImageRead, SyntheticRoundTrip) {
    const auto m = synthetic();
    const auto bytes = encode(m);
    auto r = img::read(bytes);
    ASSERT_TRUE(r) << r.error().what();
    const auto& got = *r;
    EXPECT_EQ(std::memcmp(&got.header, &m.header, sizeof(m.header)), 0);
    EXPECT_EQ(std::memcmp(&got.task, &m.task, sizeof(m.task)), 0);
    EXPECT_EQ(std::memcmp(&got.regs, &m.regs, sizeof(m.regs)), 0);
    EXPECT_EQ(got.xsave, m.xsave);
    EXPECT_EQ(std::memcmp(&got.signals, &m.signals, sizeof(m.signals)), 0);
    EXPECT_EQ(got.umask, m.umask);
    EXPECT_EQ(got.cwd, m.cwd);
    EXPECT_EQ(std::memcmp(&got.mm, &m.mm, sizeof(m.mm)), 0);
    ASSERT_EQ(got.vmas.size(), m.vmas.size());
    for (std::size_t i = 0; i < m.vmas.size(); i++) {
        EXPECT_EQ(std::memcmp(&got.vmas[i].rec, &m.vmas[i].rec, sizeof(ghost_vma)), 0) << i;
        EXPECT_EQ(got.vmas[i].path, m.vmas[i].path);
        ASSERT_EQ(got.vmas[i].runs.size(), m.vmas[i].runs.size());
        for (std::size_t j = 0; j < m.vmas[i].runs.size(); j++) {
            const auto& run = got.vmas[i].runs[j];
            EXPECT_EQ(run.addr, m.vmas[i].runs[j].addr);
            EXPECT_EQ(run.nr_pages, m.vmas[i].runs[j].nr_pages);
            EXPECT_EQ(run.data_offset % kPage, 0u);
            // data_offset is where the data is: compare with the bytes.
            EXPECT_TRUE(std::equal(bytes.begin() + run.data_offset,
                                   bytes.begin() + run.data_offset + run.nr_pages * kPage,
                                   pattern(run.addr, run.nr_pages).begin()));
        }
    }
    ASSERT_EQ(got.files.size(), m.files.size());
    for (std::size_t i = 0; i < m.files.size(); i++) {
        EXPECT_EQ(std::memcmp(&got.files[i].rec, &m.files[i].rec, sizeof(ghost_file)), 0);
        EXPECT_EQ(got.files[i].path, m.files[i].path);
    }
    EXPECT_EQ(got.bytes, bytes.size());
    EXPECT_EQ(got.crc32c, img::crc32c(0, std::span(bytes).first(bytes.size() - 32)));
    EXPECT_EQ(got.pages(), 6u);
    // Encoding what was read gives the same bytes.
    EXPECT_EQ(encode(got), bytes);
}

TEST(ImageRead, PageDataGoesToOnPagesExactly) {
    const auto m = synthetic();
    const auto bytes = encode(m);
    std::vector<Seen> seen;
    auto r = img::read(bytes, collect(seen));
    ASSERT_TRUE(r) << r.error().what();
    std::vector<Seen> want;
    for (const auto& v : r->vmas)
        for (const auto& run : v.runs)
            want.push_back({v.rec.start, run.addr, run.nr_pages, run.data_offset,
                            pattern(run.addr, run.nr_pages)});
    ASSERT_EQ(seen.size(), want.size());
    for (std::size_t i = 0; i < want.size(); i++) {
        EXPECT_EQ(seen[i].vma, want[i].vma) << i;
        EXPECT_EQ(seen[i].addr, want[i].addr) << i;
        EXPECT_EQ(seen[i].nr, want[i].nr) << i;
        EXPECT_EQ(seen[i].data_offset, want[i].data_offset) << i;
        EXPECT_EQ(seen[i].data, want[i].data) << i;
    }
}

TEST(ImageRead, LongRunComesInBoundedChunks) {
    auto m = synthetic();
    auto& heap = m.vmas[2];
    heap.rec.end = heap.rec.start + 600 * kPage;
    heap.runs = {{heap.rec.start + kPage, 599, 0}};
    heap.rec.nr_pages = 599;
    m.mm.brk = heap.rec.end;
    const auto bytes = encode(m);
    std::vector<Seen> seen;
    auto r = img::read(bytes, collect(seen));
    ASSERT_TRUE(r) << r.error().what();
    std::vector<Seen> heap_calls;
    std::copy_if(seen.begin(), seen.end(), std::back_inserter(heap_calls),
                 [&](const Seen& s) { return s.vma == heap.rec.start; });
    const std::uint64_t per = img::kPagesChunk / kPage;
    ASSERT_EQ(heap_calls.size(), 3u); // 256 + 256 + 87
    std::uint64_t addr = heap.rec.start + kPage, off = r->vmas[2].runs[0].data_offset;
    for (std::size_t i = 0; i < heap_calls.size(); i++) {
        const auto& c = heap_calls[i];
        EXPECT_EQ(c.addr, addr);
        EXPECT_EQ(c.nr, i < 2 ? per : 599 - 2 * per);
        EXPECT_EQ(c.data_offset, off);
        EXPECT_LE(c.data.size(), img::kPagesChunk);
        EXPECT_EQ(c.data, pattern(c.addr, c.nr));
        addr += c.nr * kPage;
        off += c.nr * kPage;
    }
}

TEST(ImageRead, StopsAtEndAndLeavesWhatFollows) {
    auto bytes = encode(synthetic());
    const auto len = bytes.size();
    for (char c : std::string_view("NEXT MESSAGE"))
        bytes.push_back(static_cast<std::byte>(c));
    auto r = img::read(bytes);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->bytes, len);

    // Through a pipe: what follows END is still there for the caller.
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    ghost::UniqueFd rd(p[0]), wr(p[1]);
    std::thread t([&] {
        std::size_t off = 0;
        while (off < bytes.size()) {
            const auto n = ::write(wr.get(), bytes.data() + off, bytes.size() - off);
            if (n <= 0)
                break;
            off += static_cast<std::size_t>(n);
        }
        wr.reset();
    });
    img::FdSource src(rd.get());
    auto r2 = img::read(src);
    char rest[32] = {};
    const auto n = ::read(rd.get(), rest, sizeof(rest));
    t.join();
    ASSERT_TRUE(r2) << r2.error().what();
    EXPECT_EQ(std::string(rest, n > 0 ? n : 0), "NEXT MESSAGE");
}

// What the format allows at its limits is accepted.
struct AcceptCase {
    const char* name;
    std::function<void(img::Image&)> change;
};

void PrintTo(const AcceptCase& c, std::ostream* os) {
    *os << c.name;
}

class ImageAccepts : public testing::TestWithParam<AcceptCase> {};

TEST_P(ImageAccepts, Case) {
    auto m = synthetic();
    GetParam().change(m);
    auto r = img::read(encode(m));
    EXPECT_TRUE(r) << r.error().what();
}

// A CREDS section (another user, two groups, some capabilities).
void with_creds(img::Image& m) {
    m.header.features |= GHOST_IMAGE_FEAT_CREDS;
    m.header.required_features |= GHOST_IMAGE_FEAT_CREDS;
    ghost_creds c{};
    c.uid = c.euid = c.suid = c.fsuid = 65534;
    c.gid = c.egid = c.sgid = c.fsgid = 65534;
    c.cap_permitted = c.cap_inheritable = c.cap_ambient = 1ULL << 10;
    c.cap_effective = 1ULL << 10;
    c.cap_bset = (1ULL << 41) - 1;
    c.ngroups = 2;
    c.loginuid = 0xffffffff;
    m.creds = c;
    m.groups = {65533, 12345};
}

const AcceptCase kAccepts[] = {
    {"MxcsrHighBitsWhenNoSseStateIsUsed",
     [](img::Image& m) {
         const std::uint32_t mxcsr = 0xffff1f80;
         const std::uint64_t bv = 0;
         std::memcpy(m.xsave.data() + 24, &mxcsr, 4);
         std::memcpy(m.xsave.data() + 512, &bv, 8);
     }},
    {"LargestXstate",
     [](img::Image& m) {
         m.xstate.size = 65536;
         m.xsave.resize(65536);
     }},
    {"SmallestXstate",
     [](img::Image& m) {
         m.xstate.size = 576;
         m.xsave.resize(576);
     }},
    {"LongestCwd", [](img::Image& m) { m.cwd = "/" + std::string(4094, 'd'); }},
    {"NoArgsEnvOrStack",
     [](img::Image& m) { m.mm.arg_start = m.mm.env_start = m.mm.start_stack = 0; }},
    {"FullAuxv",
     [](img::Image& m) {
         m.mm.auxv_words = GHOST_AUXV_WORDS;
         m.mm.auxv[GHOST_AUXV_WORDS - 2] = 0;
     }},
    {"HighestFd", [](img::Image& m) { m.files.back().rec.fd = (1 << 20) - 1; }},
    {"LargestFileLimit",
     [](img::Image& m) {
         m.rlimits.rlim[7] = {1 << 20, 1 << 20};
     }},
    {"NoFiles", [](img::Image& m) { m.files.clear(); }},
    {"DupOfEarlierFileId",
     [](img::Image& m) {
         m.files[1].rec.kind = GHOST_FILE_DUP;
         m.files[1].rec.file_id = m.files[0].rec.file_id;
         m.files[1].rec.mode = m.files[0].rec.mode;
     }},
    {"DupOfEarlierFdInVersion1",
     [](img::Image& m) {
         m = version1(m);
         m.files[1].rec.kind = GHOST_FILE_DUP;
         m.files[1].rec.pos = static_cast<std::uint64_t>(m.files[0].rec.fd);
         m.files[1].rec.mode = m.files[0].rec.mode;
     }},
    {"Version1", [](img::Image& m) { m = version1(m); }},
    {"NoVdsoId",
     [](img::Image& m) {
         m.header.features &= ~GHOST_IMAGE_FEAT_VDSO_ID;
         m.mm.vdso_size = m.mm.vdso_crc32c = 0;
     }},
    {"UnknownOptionalFeature", [](img::Image& m) { m.header.features |= 1ULL << 40; }},
    {"NoRseqNoRobustList",
     [](img::Image& m) {
         m.task.rseq = m.task.robust_list = 0;
         m.task.rseq_len = 7;
         m.task.robust_list_len = 5;
     }},
    {"KernelAddressHandlerIsTheProcessProblem",
     [](img::Image& m) { m.signals.action[SIGUSR1 - 1].handler = 0xffffffff81000000; }},
    {"InheritedNameNeedNotBeAPath",
     [](img::Image& m) {
         m.files[0].path = "pipe:[1]";
         m.files[0].rec.path_len = 8;
     }},
    {"UmaskHighBitsAreIgnored", [](img::Image& m) { m.umask = 0xffffffff; }},
    {"CredentialsWithGroups", [](img::Image& m) { with_creds(m); }},
};

INSTANTIATE_TEST_SUITE_P(Limits, ImageAccepts, testing::ValuesIn(kAccepts),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- every rule, broken once -----------------------------------------------------

struct RejectCase {
    const char* name;
    std::function<Bytes()> make; // the broken image
    const char* words;           // in the error message
};

// The synthetic image with a POSIX write lock on bytes 10-29 of fd 3.
img::Image locked(img::Image m) {
    m.header.features |= GHOST_IMAGE_FEAT_LOCKS;
    m.header.required_features |= GHOST_IMAGE_FEAT_LOCKS;
    ghost_lock l{};
    l.file_id = m.files.back().rec.file_id;
    l.kind = GHOST_LOCK_POSIX;
    l.type = F_WRLCK;
    l.start = 10;
    l.len = 20;
    m.locks.push_back(l);
    return m;
}

Bytes lock_changed(const std::function<void(img::Image&)>& f) {
    auto m = locked(synthetic());
    f(m);
    return encode(m);
}

Bytes changed(const std::function<void(img::Image&)>& f) {
    auto m = synthetic();
    f(m);
    return encode(m);
}

// A byte-level change to the synthetic image, checksum made right again.
Bytes patched(const std::function<void(Bytes&)>& f) {
    auto b = encode(synthetic());
    f(b);
    refresh_crc(b);
    return b;
}

Bytes rearranged(const std::function<void(std::vector<Piece>&)>& f) {
    const auto m = synthetic();
    auto ps = pieces(m);
    f(ps);
    return build(m, ps);
}

// Offset of the ghost_pages record of the @nth PAGES section.
std::size_t pages_rec(const Bytes& b, int nth = 0) {
    return find(b, GHOST_SEC_PAGES, nth).at + sizeof(ghost_section);
}

#define FIELD_AT(type, field, section)                                                             \
    (find(b, section).at + sizeof(ghost_section) + offsetof(type, field))

const RejectCase kRejects[] = {
    // header
    {"BadMagic", [] { return changed([](auto& m) { m.header.magic ^= 1; }); }, "bad magic"},
    {"Version3", [] { return changed([](auto& m) { m.header.version = 3; }); }, "version 3"},
    {"Version0", [] { return changed([](auto& m) { m.header.version = 0; }); }, "version 0"},
    {"HeaderSize", [] { return changed([](auto& m) { m.header.header_size = 68; }); },
     "header size is 68"},
    {"HeaderSizeSmall", [] { return changed([](auto& m) { m.header.header_size = 56; }); },
     "header size is 56"},
    {"Arch", [] { return changed([](auto& m) { m.header.arch = 3; }); }, "architecture 3"},
    {"PageSize", [] { return changed([](auto& m) { m.header.page_size = 8192; }); },
     "page size is 8192"},
    {"HeaderPad", [] { return changed([](auto& m) { m.header.__pad = 1; }); }, "reserved"},
    {"HeaderResv", [] { return changed([](auto& m) { m.header.resv[0] = 1; }); }, "reserved"},
    {"Empty", [] { return Bytes{}; }, "ends early, at byte 0"},
    // framing
    {"SectionFlags",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) {
                 w.section(GHOST_SEC_TASK, rec_bytes(synthetic().task), 2, sizeof(ghost_task));
             };
         });
     },
     "unknown flags 0x2"},
    {"UnknownSectionFirst",
     [] {
         return rearranged(
             [](auto& ps) { ps.insert(ps.begin(), [](img::Writer& w) { w.section(99, {}); }); });
     },
     "section type 99 at byte 64 is unknown to this reader and not skippable"},
    {"RegsBeforeTask", [] { return rearranged([](auto& ps) { std::swap(ps[0], ps[1]); }); },
     "expected section task at byte 64, found section regs"},
    {"TaskTwice", [] { return rearranged([](auto& ps) { ps.insert(ps.begin(), ps[0]); }); },
     "expected section regs at byte 160, found section task"},
    {"NoXstate", [] { return rearranged([](auto& ps) { ps.erase(ps.begin() + 2); }); },
     "expected section xstate"},
    {"NoRlimits", [] { return rearranged([](auto& ps) { ps.erase(ps.begin() + 5); }); },
     "expected section rlimits"},
    {"TaskTooShort",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) {
                 w.section(GHOST_SEC_TASK, rec_bytes(synthetic().task).first(40), 0, 40);
             };
         });
     },
     "has a 40-byte record, shorter than the 80 bytes of version 1"},
    {"RecordSizeZero",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) { w.section(GHOST_SEC_TASK, rec_bytes(synthetic().task)); };
         });
     },
     "has a 0-byte record"},
    {"RecordLargerThanSection",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) {
                 w.section(GHOST_SEC_TASK, rec_bytes(synthetic().task), 0, 88);
             };
         });
     },
     "has 80 bytes, too short for its 88-byte record"},
    {"LargerRecordNonZeroTail",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) {
                 Bytes p(sizeof(ghost_task) + 8);
                 const auto t = synthetic().task;
                 std::memcpy(p.data(), &t, sizeof(ghost_task));
                 p[sizeof(ghost_task) + 3] = std::byte{1};
                 w.section(GHOST_SEC_TASK, p, 0, sizeof(ghost_task) + 8);
             };
         });
     },
     "non-zero bytes beyond the 80 this reader knows of the 88-byte task record at byte 64 "
     "(byte 163)"},
    {"LargerHeaderNonZeroTail",
     [] {
         return patched([](Bytes& b) {
             auto m = synthetic();
             m.header.header_size = 72;
             b = encode(m);
             b[70] = std::byte{1};
             refresh_crc(b);
         });
     },
     "non-zero header bytes beyond the 64 this reader knows (byte 70)"},
    {"UnknownRequiredFeature",
     [] {
         return changed([](auto& m) {
             m.header.features |= 1ULL << 9;
             m.header.required_features |= 1ULL << 9;
         });
     },
     "requires feature bit 9 (byte 48), which this reader does not know"},
    {"RequiredFeatureNotUsed",
     [] { return changed([](auto& m) { m.header.features &= ~GHOST_IMAGE_FEAT_FILE_ID; }); },
     "requires features 0x1 (byte 48) that it does not use"},
    {"FeaturesInVersion1",
     [] {
         return changed([](auto& m) {
             m = version1(m);
             m.header.features = GHOST_IMAGE_FEAT_VDSO_ID;
         });
     },
     "reserved"},
    {"FlagsInVersion1",
     [] {
         img::Writer w;
         auto m = version1(synthetic());
         w.header(m.header);
         w.section(GHOST_SEC_TASK, rec_bytes(m.task), 0, sizeof(m.task));
         w.end();
         return w.bytes();
     },
     "the task section at byte 64 has unknown flags 0x500000"},
    {"SkippableSectionInVersion1",
     [] {
         img::Writer w;
         auto m = version1(synthetic());
         w.header(m.header);
         w.section(99, {}, GHOST_SECTION_SKIPPABLE);
         w.end();
         return w.bytes();
     },
     "has unknown flags 0x1"},
    {"VdsoFeatureWithoutSize", [] { return changed([](auto& m) { m.mm.vdso_size = 0; }); },
     "vdso_size 0 (byte 4304) does not fit the image's vDSO feature bit"},
    {"VdsoSizeWithoutFeature",
     [] { return changed([](auto& m) { m.header.features &= ~GHOST_IMAGE_FEAT_VDSO_ID; }); },
     "vdso_size 8192 (byte 4304) does not fit"},
    {"VdsoSizeNotThatOfTheMapping",
     [] { return changed([](auto& m) { m.mm.vdso_size = 0x3000; }); },
     "records a 12288-byte vDSO at 0x7ffff7fc1000 (byte 4304) that is not among the mappings"},
    {"TaskTooLong",
     [] {
         return rearranged([](auto& ps) {
             ps[0] = [](img::Writer& w) {
                 Bytes p(sizeof(ghost_task) + 8);
                 w.section(GHOST_SEC_TASK, p, 0, sizeof(ghost_task));
             };
         });
     },
     "has 88 bytes, expected 80"},
    {"NonZeroPaddingAfterFs",
     [] {
         return patched([](Bytes& b) {
             const auto fs = find(b, GHOST_SEC_FS);
             b[fs.at + sizeof(ghost_section) + fs.size] = std::byte{1};
         });
     },
     "non-zero padding after the fs section"},
    // creds
    {"CredsPad", [] { return changed([](auto& m) { with_creds(m), m.creds->__pad = 1; }); },
     "the credentials section is malformed at byte 160"},
    {"CredsEffectiveBeyondPermitted",
     [] { return changed([](auto& m) { with_creds(m), m.creds->cap_effective = 3ULL << 10; }); },
     "the credentials section is malformed"},
    {"CredsAmbientNotInheritable",
     [] { return changed([](auto& m) { with_creds(m), m.creds->cap_inheritable = 0; }); },
     "the credentials section is malformed"},
    {"CredsInvalidUid", [] { return changed([](auto& m) { with_creds(m), m.creds->euid = ~0U; }); },
     "the credentials section is malformed"},
    {"CredsUnknownSecurebits",
     [] { return changed([](auto& m) { with_creds(m), m.creds->securebits = 0x100; }); },
     "the credentials section is malformed"},
    {"CredsGroupsCountWrong",
     [] { return changed([](auto& m) { with_creds(m), m.creds->ngroups = 3; }); },
     "the creds section at byte 160 has"},
    {"CredsMissing",
     [] { return changed([](auto& m) { m.header.features |= GHOST_IMAGE_FEAT_CREDS; }); },
     "expected section creds at byte 160"},
    {"CredsWithoutFeature",
     [] {
         return changed([](auto& m) {
             with_creds(m);
             m.header.features = m.header.required_features = GHOST_IMAGE_FEAT_FILE_ID;
         });
     },
     "expected section regs at byte 160, found section creds"},
    // task
    {"TaskPad", [] { return changed([](auto& m) { m.task.__pad = 1; }); },
     "task section at byte 64 has non-zero reserved"},
    {"TaskResv", [] { return changed([](auto& m) { m.task.resv[1] = 1; }); }, "reserved"},
    {"RseqKernel", [] { return changed([](auto& m) { m.task.rseq = 0xffffffffff600000; }); },
     "rseq area"},
    {"RseqAtUserEnd", [] { return changed([](auto& m) { m.task.rseq = kUserEnd; }); },
     "rseq area 0x7ffffffff000"},
    // rseq(2) refuses it (EINVAL) past the user engine's point of no return.
    {"RseqMisaligned", [] { return changed([](auto& m) { m.task.rseq = 0x602108; }); },
     "the rseq area 0x602108 (byte 104) is not 32-byte aligned"},
    {"ClearChildTid", [] { return changed([](auto& m) { m.task.clear_child_tid = ~0ULL; }); },
     "clear_child_tid"},
    {"RobustList", [] { return changed([](auto& m) { m.task.robust_list = 1ULL << 47; }); },
     "robust list"},
    {"RobustListLen", [] { return changed([](auto& m) { m.task.robust_list_len = 16; }); },
     "robust_list_len is 16"},
    {"RseqLen", [] { return changed([](auto& m) { m.task.rseq_len = 20; }); }, "rseq_len is 20"},
    // registers
    {"Cs", [] { return changed([](auto& m) { m.regs.cs = 0x23; }); }, "cs is 0x23"},
    {"Ss", [] { return changed([](auto& m) { m.regs.ss = 0; }); }, "ss is 0x0"},
    {"FsSelector", [] { return changed([](auto& m) { m.regs.fs = 0x10; }); }, "fs selector"},
    {"GsSelector", [] { return changed([](auto& m) { m.regs.gs = 1; }); }, "gs selector"},
    {"IpAboveUser", [] { return changed([](auto& m) { m.regs.ip = kUserEnd; }); },
     "ip is 0x7ffffffff000"},
    {"FsBase", [] { return changed([](auto& m) { m.regs.fs_base = ~0ULL; }); }, "fs_base"},
    {"GsBase", [] { return changed([](auto& m) { m.regs.gs_base = 1ULL << 63; }); }, "gs_base"},
    // xstate
    {"XstatePad", [] { return changed([](auto& m) { m.xstate.__pad = 1; }); },
     "FPU section at byte"},
    {"XstateTooSmall",
     [] {
         return changed([](auto& m) {
             m.xstate.size = 575;
             m.xsave.resize(575);
         });
     },
     "holds 575 bytes"},
    {"XstateTooLarge",
     [] {
         return changed([](auto& m) {
             m.xstate.size = 65544;
             m.xsave.resize(65544);
         });
     },
     "holds 65544 bytes"},
    {"XstateHugeSizeNoData", [] { return changed([](auto& m) { m.xstate.size = ~0u; }); },
     "holds 4294967295 bytes"},
    {"XstateSizeDisagrees", [] { return changed([](auto& m) { m.xsave.resize(840); }); },
     "has 856 bytes, expected 848"},
    {"XcompBv", [] { return changed([](auto& m) { m.xsave[527] = std::byte{0x80}; }); },
     "compacted"},
    {"XsaveHeaderReserved", [] { return changed([](auto& m) { m.xsave[570] = std::byte{1}; }); },
     "reserved bytes at byte"},
    {"MxcsrReservedBits",
     [] {
         return changed([](auto& m) {
             const std::uint32_t mxcsr = 0x11f80;
             std::memcpy(m.xsave.data() + 24, &mxcsr, 4);
         });
     },
     "MXCSR 0x11f80"},
    // signals
    {"SigactionFlags",
     [] { return changed([](auto& m) { m.signals.action[SIGUSR1 - 1].flags |= 0x400; }); },
     "signal 10 (byte"},
    {"SigactionRestorer",
     [] { return changed([](auto& m) { m.signals.action[0].restorer = 0xffff800000000000; }); },
     "restorer 0xffff800000000000"},
    {"SigkillCaught",
     [] { return changed([](auto& m) { m.signals.action[SIGKILL - 1].handler = 1; }); },
     "signal 9"},
    {"SigstopCaught",
     [] { return changed([](auto& m) { m.signals.action[SIGSTOP - 1].handler = 0x401000; }); },
     "signal 19"},
    {"SignalsPad", [] { return changed([](auto& m) { m.signals.__pad = 1; }); },
     "signal section at byte"},
    {"PendingRealtime", [] { return changed([](auto& m) { m.signals.pending |= 1ULL << 33; }); },
     "real-time"},
    {"PendingSignal32", [] { return changed([](auto& m) { m.signals.pending |= 1ULL << 31; }); },
     "real-time"},
    {"PendingSigkill",
     [] { return changed([](auto& m) { m.signals.pending |= 1ULL << (SIGKILL - 1); }); },
     "holds SIGKILL or SIGSTOP"},
    {"PendingSigstop",
     [] { return changed([](auto& m) { m.signals.pending |= 1ULL << (SIGSTOP - 1); }); },
     "holds SIGKILL or SIGSTOP"},
    {"AltstackFlags", [] { return changed([](auto& m) { m.signals.altstack_flags = 4; }); },
     "alternate stack has unknown flags 0x4"},
    {"AltstackSp", [] { return changed([](auto& m) { m.signals.altstack_sp = kUserEnd + 1; }); },
     "alternate stack 0x7ffffffff001"},
    // sigaltstack(2) refuses it (ENOMEM) past the user engine's point of no return.
    {"AltstackSmall", [] { return changed([](auto& m) { m.signals.altstack_size = 2047; }); },
     "the alternate stack's size 2047 (byte"},
    // fs
    {"CwdEmpty", [] { return changed([](auto& m) { m.cwd.clear(); }); }, "path of length 0"},
    {"CwdRelative", [] { return changed([](auto& m) { m.cwd = "tmp/work"; }); }, "not absolute"},
    {"CwdNul", [] { return changed([](auto& m) { m.cwd = std::string("/tm\0p", 5); }); },
     "has a NUL"},
    {"CwdTooLong", [] { return changed([](auto& m) { m.cwd = "/" + std::string(4095, 'd'); }); },
     "path of length 4096"},
    {"CwdLenBeyondSection",
     [] {
         return patched([](Bytes& b) {
             put<std::uint32_t>(b, FIELD_AT(ghost_fs, cwd_len, GHOST_SEC_FS), 100);
         });
     },
     "expected 108"},
    // rlimits
    {"SoftAboveHard", [] { return changed([](auto& m) {
                               m.rlimits.rlim[3] = {100, 99};
                           }); },
     "limit 3 (byte"},
    {"FileLimitTooLarge",
     [] { return changed([](auto& m) {
              m.rlimits.rlim[7] = {1024, (1 << 20) + 1};
          }); },
     "file limit 1048577"},
    // mm
    {"NoVmas", [] { return changed([](auto& m) { m.mm.nr_vmas = 0; }); }, "0 mappings"},
    {"TooManyVmas", [] { return changed([](auto& m) { m.mm.nr_vmas = 65537; }); },
     "65537 mappings"},
    {"OneVmaMissing", [] { return changed([](auto& m) { m.mm.nr_vmas++; }); },
     "expected section vma at byte"},
    {"OneVmaTooMany", [] { return changed([](auto& m) { m.mm.nr_vmas--; }); },
     "unexpected section vma at byte"},
    {"AuxvOdd", [] { return changed([](auto& m) { m.mm.auxv_words = 3; }); }, "auxv_words is 3"},
    {"AuxvEmpty", [] { return changed([](auto& m) { m.mm.auxv_words = 0; }); }, "auxv_words is 0"},
    {"AuxvTooLong", [] { return changed([](auto& m) { m.mm.auxv_words = 66; }); },
     "auxv_words is 66"},
    {"AuxvNoAtNull", [] { return changed([](auto& m) { m.mm.auxv[2] = 25; }); }, "AT_NULL"},
    {"BrkBelowStart", [] { return changed([](auto& m) { m.mm.brk = m.mm.start_brk - 1; }); },
     "start_brk 0x602000 is above brk"},
    {"ArgsInverted", [] { return changed([](auto& m) { m.mm.arg_end = m.mm.arg_start - 1; }); },
     "arg_start"},
    {"EnvInverted", [] { return changed([](auto& m) { m.mm.env_start = m.mm.env_end + 1; }); },
     "env_start"},
    {"BrkKernel", [] { return changed([](auto& m) { m.mm.brk = 0xffff888000000000; }); },
     "brk 0xffff888000000000"},
    {"EndCodeKernel", [] { return changed([](auto& m) { m.mm.end_code = kUserEnd; }); },
     "end_code"},
    {"EndDataKernel", [] { return changed([](auto& m) { m.mm.end_data = ~0ULL; }); }, "end_data"},
    {"ArgEndKernel", [] { return changed([](auto& m) { m.mm.arg_end = kUserEnd; }); }, "arg_end"},
    {"EnvEndKernel", [] { return changed([](auto& m) { m.mm.env_end = kUserEnd; }); }, "env_end"},
    {"StackKernel", [] { return changed([](auto& m) { m.mm.start_stack = kUserEnd; }); },
     "start_stack 0x7ffffffff000"},
    {"ArgsOutsideMappings",
     [] {
         return changed([](auto& m) {
             m.mm.arg_start = 0x10000;
             m.mm.arg_end = 0x10010;
         });
     },
     "outside the mappings: arg_start"},
    {"EnvOutsideMappings",
     [] { return changed([](auto& m) { m.mm.env_start = 0x603000 + 0x10000; }); },
     "outside the mappings: env_start"},
    {"StackOutsideMappings", [] { return changed([](auto& m) { m.mm.start_stack = 0x500000; }); },
     "outside the mappings: start_stack"},
    // vma
    {"VmaPad", [] { return changed([](auto& m) { m.vmas[0].rec.__pad = 1; }); },
     "mapping 0x400000-0x402000 (section at byte"},
    {"VmaUnaligned", [] { return changed([](auto& m) { m.vmas[0].rec.start += 8; }); },
     "not page-aligned"},
    {"VmaEmpty", [] { return changed([](auto& m) { m.vmas[0].rec.end = m.vmas[0].rec.start; }); },
     "empty or inverted"},
    {"VmaInverted",
     [] { return changed([](auto& m) { std::swap(m.vmas[0].rec.start, m.vmas[0].rec.end); }); },
     "empty or inverted"},
    {"VmaAboveUser",
     [] { return changed([](auto& m) { m.vmas.back().rec.end = kUserEnd + kPage; }); },
     "above user space"},
    {"VmaOverlaps", [] { return changed([](auto& m) { m.vmas[2].rec.start = 0x600000; }); },
     "overlaps"},
    {"VmasOutOfOrder", [] { return changed([](auto& m) { std::swap(m.vmas[0], m.vmas[1]); }); },
     "overlaps"},
    {"VmaProt", [] { return changed([](auto& m) { m.vmas[0].rec.prot |= 8; }); },
     "protection bits 0xd"},
    {"VmaFlags", [] { return changed([](auto& m) { m.vmas[0].rec.flags |= 1u << 19; }); },
     "unknown flags 0x80004"},
    // Mapping attributes need their feature bit, and only kernel-made sets.
    {"VmaAttrsWithoutFeature",
     [] { return changed([](auto& m) { m.vmas[0].rec.flags |= GHOST_VMA_DONTDUMP; }); },
     "has attributes 0x800 that are not allowed here"},
    {"VmaLockOnFaultWithoutLock",
     [] {
         return changed([](auto& m) {
             m.header.features |= GHOST_IMAGE_FEAT_VMA_ATTRS;
             m.vmas[0].rec.flags |= GHOST_VMA_LOCKONFAULT;
         });
     },
     "has attributes 0x200 that are not allowed here"},
    {"VmaWipeOnForkOnAFile",
     [] {
         return changed([](auto& m) {
             m.header.features |= GHOST_IMAGE_FEAT_VMA_ATTRS;
             m.vmas[0].rec.flags |= GHOST_VMA_WIPEONFORK;
         });
     },
     "has attributes 0x1000 that are not allowed here"},
    {"VmaMorePagesThanSize", [] { return changed([](auto& m) { m.vmas[1].rec.nr_pages = 2; }); },
     "carries 2 pages but has only 1"},
    {"FileVmaWithoutPath",
     [] {
         return changed([](auto& m) {
             m.vmas[0].rec.path_len = 0;
             m.vmas[0].path.clear();
         });
     },
     "file mapping without a path"},
    {"AnonVmaWithPath",
     [] {
         return changed([](auto& m) {
             m.vmas[2].rec.path_len = 4;
             m.vmas[2].path = "/abc";
         });
     },
     "anonymous but has a path"},
    {"SharedAnon", [] { return changed([](auto& m) { m.vmas[2].rec.flags |= GHOST_VMA_SHARED; }); },
     "shared but not a file mapping"},
    {"SharedFileWithPages",
     [] { return changed([](auto& m) { m.vmas[1].rec.flags |= GHOST_VMA_SHARED; }); },
     "carries pages but is shared"},
    {"VdsoWithPages",
     [] {
         return changed([](auto& m) {
             m.vmas[4].rec.nr_pages = 1;
             m.vmas[4].runs = {{m.vmas[4].rec.start, 1, 0}};
         });
     },
     "carries pages but is shared or the vDSO"},
    {"VmaPathRelative", [] { return changed([](auto& m) { m.vmas[0].path[0] = 'u'; }); },
     "not absolute"},
    {"VmaPathLenDisagrees", [] { return changed([](auto& m) { m.vmas[0].rec.path_len = 5; }); },
     "expected 53"},
    {"VmaPathTooLong",
     [] {
         return changed([](auto& m) {
             m.vmas[0].path = "/" + std::string(4095, 'p');
             m.vmas[0].rec.path_len = 4096;
         });
     },
     "path of length 4096"},
    {"VmaPathNul", [] { return changed([](auto& m) { m.vmas[0].path[4] = '\0'; }); }, "has a NUL"},
    // pages
    {"RunUnaligned", [] { return changed([](auto& m) { m.vmas[2].runs[0].addr += 8; }); },
     "not page-aligned"},
    {"RunBelowVma", [] { return changed([](auto& m) { m.vmas[2].runs[0].addr -= kPage; }); },
     "starts outside its mapping"},
    {"RunAfterVma", [] { return changed([](auto& m) { m.vmas[2].runs[1].addr = 0x606000; }); },
     "starts outside its mapping"},
    {"RunPastVmaEnd",
     [] { return changed([](auto& m) { m.vmas.back().runs[0].addr = kUserEnd - kPage; }); },
     "ends past its mapping"},
    {"RunsOverlap", [] { return changed([](auto& m) { m.vmas[2].runs[1].addr = 0x603000; }); },
     "overlaps or precedes the run before it"},
    {"RunsDescend",
     [] { return changed([](auto& m) {
              m.vmas[2].runs = {{0x605000, 1, 0}, {0x602000, 2, 0}};
          }); },
     "overlaps or precedes the run before it"},
    {"RunAboveNrPages", [] { return changed([](auto& m) { m.vmas[2].rec.nr_pages = 1; }); },
     "above its nr_pages 1"},
    {"RunsBelowNrPages", [] { return changed([](auto& m) { m.vmas[2].rec.nr_pages = 4; }); },
     "expected section pages"},
    {"RunHugeNrPages",
     [] {
         return patched([](Bytes& b) {
             put<std::uint64_t>(b, pages_rec(b, 1) + offsetof(ghost_pages, nr_pages), ~0ULL - 1);
         });
     },
     "ends past its mapping"},
    {"RunNrPagesWrapsAround",
     [] {
         // ghost.ko's bound check would wrap here; this one must not.
         return patched([](Bytes& b) {
             put<std::uint64_t>(b, pages_rec(b, 2) + offsetof(ghost_pages, nr_pages), -2ULL);
         });
     },
     "ends past its mapping"},
    {"RunEmpty",
     [] {
         return patched([](Bytes& b) {
             put<std::uint64_t>(b, pages_rec(b) + offsetof(ghost_pages, nr_pages), 0);
         });
     },
     "is empty"},
    {"RunInheritedWithoutParent",
     [] {
         return patched([](Bytes& b) {
             put<std::uint32_t>(b, pages_rec(b) + offsetof(ghost_pages, flags), 1);
         });
     },
     "is inherited from a parent, but the image has none"},
    {"RunUnknownFlags",
     [] {
         return patched([](Bytes& b) {
             put<std::uint32_t>(b, pages_rec(b) + offsetof(ghost_pages, flags), 2);
         });
     },
     "has unknown flags 0x2"},
    {"RunDataOffsetInsideRecord",
     [] {
         return patched([](Bytes& b) {
             put<std::uint32_t>(b, pages_rec(b) + offsetof(ghost_pages, data_offset), 16);
         });
     },
     "data_offset 16"},
    {"RunSizeDisagrees",
     [] {
         return patched([](Bytes& b) {
             const auto at = find(b, GHOST_SEC_PAGES).at;
             put<std::uint64_t>(b, at + offsetof(ghost_section, size),
                                get<std::uint64_t>(b, at + offsetof(ghost_section, size)) + 8);
         });
     },
     "section size of"},
    {"RunDataUnaligned",
     [] {
         return patched([](Bytes& b) {
             const auto at = find(b, GHOST_SEC_PAGES).at;
             const auto rec = at + sizeof(ghost_section);
             put<std::uint64_t>(b, at + offsetof(ghost_section, size),
                                get<std::uint64_t>(b, at + offsetof(ghost_section, size)) + 8);
             put<std::uint32_t>(b, rec + offsetof(ghost_pages, data_offset),
                                get<std::uint32_t>(b, rec + offsetof(ghost_pages, data_offset)) +
                                    8);
         });
     },
     "not page-aligned"},
    {"RunPaddingNotZero",
     [] {
         return patched([](Bytes& b) { b[pages_rec(b) + sizeof(ghost_pages) + 5] = std::byte{7}; });
     },
     "non-zero padding in the page run"},
    {"RunSectionFlags",
     [] {
         return patched([](Bytes& b) {
             put<std::uint32_t>(b, find(b, GHOST_SEC_PAGES).at + offsetof(ghost_section, flags), 2);
         });
     },
     "pages section at byte"},
    // files
    {"FdNegative", [] { return changed([](auto& m) { m.files[0].rec.fd = -1; }); },
     "fd -1 at byte"},
    {"FdTooLarge", [] { return changed([](auto& m) { m.files.back().rec.fd = 1 << 20; }); },
     "out of range"},
    {"FdsNotAscending", [] { return changed([](auto& m) { m.files[2].rec.fd = 1; }); },
     "does not come after fd 1"},
    {"FdsSwapped", [] { return changed([](auto& m) { std::swap(m.files[0], m.files[1]); }); },
     "does not come after fd 1"},
    {"FdFlags", [] { return changed([](auto& m) { m.files[2].rec.fd_flags = 3; }); },
     "descriptor flags 0x3"},
    // Opening a FIFO by path would block the restorer (or wake its writer).
    {"PathFifo", [] { return changed([](auto& m) { m.files[1].rec.mode = S_IFIFO; }); },
     "is reopened by path but is not a file"},
    {"FileKind", [] { return changed([](auto& m) { m.files[1].rec.kind = 4; }); },
     "unknown kind 4"},
    {"FileDupOfMissingFdInVersion1",
     [] {
         return changed([](auto& m) {
             m = version1(m);
             m.files[1].rec.kind = GHOST_FILE_DUP;
             m.files[1].rec.pos = 99;
         });
     },
     "shares the file of fd 99, which the image lacks"},
    {"FileDupOfOtherKindInVersion1",
     [] {
         return changed([](auto& m) {
             m = version1(m);
             m.files[1].rec.kind = GHOST_FILE_DUP;
             m.files[1].rec.pos = static_cast<std::uint64_t>(m.files[0].rec.fd);
             m.files[1].rec.mode = m.files[0].rec.mode ^ 0170000;
         });
     },
     "shares the file of fd"},
    {"FileDupOfMissingFileId",
     [] {
         return changed([](auto& m) {
             m.files[1].rec.kind = GHOST_FILE_DUP;
             m.files[1].rec.file_id = 99;
         });
     },
     "shares file id 99, which the image lacks"},
    {"FileDupOfOtherKind",
     [] {
         return changed([](auto& m) {
             m.files[1].rec.kind = GHOST_FILE_DUP;
             m.files[1].rec.file_id = m.files[0].rec.file_id;
             m.files[1].rec.mode = m.files[0].rec.mode ^ 0170000;
         });
     },
     "shares file id 1, which the image lacks"},
    {"FileDupWithOffset",
     [] {
         return changed([](auto& m) {
             m.files[1].rec.kind = GHOST_FILE_DUP;
             m.files[1].rec.file_id = m.files[0].rec.file_id;
             m.files[1].rec.mode = m.files[0].rec.mode;
             m.files[1].rec.pos = 7;
         });
     },
     "shares an open file but has offset 7"},
    {"FileIdMissing", [] { return changed([](auto& m) { m.files[2].rec.file_id = 0; }); },
     "the file section of fd 3 at byte"},
    {"FileIdNotAscending", [] { return changed([](auto& m) { m.files[2].rec.file_id = 2; }); },
     "opens file id 2, not above the last one, 2"},
    {"FileIdWithoutFeature",
     [] {
         return changed([](auto& m) {
             m.header.features &= ~GHOST_IMAGE_FEAT_FILE_ID;
             m.header.required_features = 0;
         });
     },
     "has file id 1 in an image without file ids"},
    {"FileRecordOfVersion1WithFileIds",
     [] {
         return rearranged([](auto& ps) {
             auto f = synthetic().files[0];
             f.rec.fd = 4;
             ps.push_back([f](img::Writer& w) {
                 Bytes p(GHOST_FILE_SIZE_VER1 + f.path.size());
                 std::memcpy(p.data(), &f.rec, GHOST_FILE_SIZE_VER1);
                 std::memcpy(p.data() + GHOST_FILE_SIZE_VER1, f.path.data(), f.path.size());
                 w.section(GHOST_SEC_FILE, p, 0, GHOST_FILE_SIZE_VER1);
             });
         });
     },
     "has no file id"},
    {"FileKindZero", [] { return changed([](auto& m) { m.files[1].rec.kind = 0; }); },
     "unknown kind 0"},
    {"FilePathRelative", [] { return changed([](auto& m) { m.files[1].path[0] = 'd'; }); },
     "not absolute"},
    {"FilePathEmpty",
     [] {
         return changed([](auto& m) {
             m.files[1].path.clear();
             m.files[1].rec.path_len = 0;
         });
     },
     "path of length 0"},
    {"FileSectionTooShort",
     [] {
         return rearranged([](auto& ps) {
             ps.push_back([](img::Writer& w) {
                 const Bytes p(16);
                 w.section(GHOST_SEC_FILE, p, 0, 16);
             });
         });
     },
     "has a 16-byte record, shorter than the 32 bytes of version 1"},
    // end
    {"CorruptPage",
     [] {
         auto b = encode(synthetic());
         b[pages_rec(b, 1) + kPage] ^= std::byte{0x40};
         return b;
     },
     "checksum mismatch"},
    {"CorruptRecordFieldThatNoRuleCovers",
     [] {
         auto b = encode(synthetic());
         b[FIELD_AT(ghost_task, comm, GHOST_SEC_TASK)] ^= std::byte{1};
         return b;
     },
     "checksum mismatch"},
    {"EndAtWrongOffset",
     [] {
         auto b = encode(synthetic());
         const auto end = find(b, GHOST_SEC_END);
         put<std::uint64_t>(b, end.at + sizeof(ghost_section) + offsetof(ghost_end, bytes),
                            end.at + 8);
         return b;
     },
     "says it is at byte"},
    {"EndPad",
     [] {
         auto b = encode(synthetic());
         put<std::uint32_t>(
             b, find(b, GHOST_SEC_END).at + sizeof(ghost_section) + offsetof(ghost_end, __pad), 1);
         return b;
     },
     "end section at byte"},
    {"EndWrongSize",
     [] {
         const auto m = synthetic();
         img::Writer w;
         w.header(m.header);
         for (const auto& p : pieces(m))
             p(w);
         const Bytes p(sizeof(ghost_end) + 8);
         w.section(GHOST_SEC_END, p, 0, sizeof(ghost_end));
         return w.bytes();
     },
     "expected 24"},
    {"NoEnd",
     [] {
         const auto m = synthetic();
         return build(m, pieces(m), false);
     },
     "ends early"},
    {"UnknownSectionAmongFiles",
     [] {
         return rearranged(
             [](auto& ps) { ps.push_back([](img::Writer& w) { w.section(99, {}); }); });
     },
     "section type 99 at byte 45272 is unknown to this reader and not skippable"},
    {"PagesAfterFiles",
     [] {
         return rearranged([](auto& ps) {
             ps.push_back([](img::Writer& w) { w.pages(0x602000, pattern(0x602000, 1)); });
         });
     },
     "unexpected section pages"},
    {"VmaAfterFiles",
     [] {
         const auto m = synthetic();
         auto ps = pieces(m);
         ps.push_back(ps[vma_piece(m, 3)]);
         return build(m, ps);
     },
     "unexpected section vma"},
    // locks
    {"LockWithoutFeature",
     [] {
         return lock_changed([](auto& m) {
             m.header.features &= ~GHOST_IMAGE_FEAT_LOCKS;
             m.header.required_features &= ~GHOST_IMAGE_FEAT_LOCKS;
         });
     },
     "unexpected section lock"},
    {"LockUnknownKind", [] { return lock_changed([](auto& m) { m.locks[0].kind = 4; }); },
     "unknown kind"},
    {"LockUnknownType", [] { return lock_changed([](auto& m) { m.locks[0].type = 2; }); },
     "unknown type"},
    {"LockResv", [] { return lock_changed([](auto& m) { m.locks[0].resv[1] = 1; }); }, "reserved"},
    {"LockFlockRange",
     [] { return lock_changed([](auto& m) { m.locks[0].kind = GHOST_LOCK_FLOCK; }); },
     "flock lock with a byte range"},
    {"LockRangeOverflow",
     [] { return lock_changed([](auto& m) { m.locks[0].start = 1ULL << 63; }); },
     "beyond the largest file offset"},
    {"LockOnInheritedFile", [] { return lock_changed([](auto& m) { m.locks[0].file_id = 1; }); },
     "does not reopen by path"},
    {"LockOnUnknownFile", [] { return lock_changed([](auto& m) { m.locks[0].file_id = 9; }); },
     "does not reopen by path"},
};

void PrintTo(const RejectCase& c, std::ostream* os) {
    *os << c.name;
}

class ImageRejects : public testing::TestWithParam<RejectCase> {};

TEST_P(ImageRejects, Case) {
    const auto bytes = GetParam().make();
    auto r = img::read(bytes);
    ASSERT_FALSE(r) << "accepted";
    EXPECT_EQ(r.error().code, std::errc::bad_message) << r.error().what();
    EXPECT_NE(r.error().message.find(GetParam().words), std::string::npos)
        << "message: " << r.error().message << "\nwanted: " << GetParam().words;
}

INSTANTIATE_TEST_SUITE_P(Rules, ImageRejects, testing::ValuesIn(kRejects),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- growth: what a reader of this version does with newer images ----------------

// An image read back must be the synthetic one, whatever the form it had.
void expect_synthetic(const Bytes& b, std::uint32_t skipped) {
    auto r = img::read(b);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->skipped, skipped);
    EXPECT_FALSE(r->exact);
    EXPECT_EQ(encode(*r), encode(synthetic()));
}

TEST(ImageRead, LockRecordsRoundTrip) {
    const auto m = locked(synthetic());
    const auto bytes = encode(m);
    auto r = img::read(bytes);
    ASSERT_TRUE(r) << r.error().what();
    ASSERT_EQ(1u, r->locks.size());
    EXPECT_EQ(0, std::memcmp(&m.locks[0], &r->locks[0], sizeof(ghost_lock)));
    EXPECT_TRUE(r->exact);
    EXPECT_EQ(bytes, encode(*r));
}

TEST(ImageGrowth, SkippableSectionsOfUnknownTypesAreIgnoredAnywhere) {
    const Bytes junk(20, std::byte{0xa5});
    const Piece skippable = [junk](img::Writer& w) {
        w.section(99, junk, GHOST_SECTION_SKIPPABLE, 4);
    };
    const auto ps = pieces(synthetic());
    for (std::size_t at :
         {std::size_t{0}, std::size_t{6}, std::size_t{8}, ps.size() - 1, ps.size()}) {
        SCOPED_TRACE(at);
        auto with = ps;
        with.insert(with.begin() + static_cast<std::ptrdiff_t>(at), {skippable, skippable});
        expect_synthetic(build(synthetic(), with), 2);
    }
}

TEST(ImageGrowth, LargerRecordsWithAZeroTailAreAccepted) {
    auto ps = pieces(synthetic());
    ps[0] = [](img::Writer& w) {
        Bytes p(sizeof(ghost_task) + 16);
        const auto t = synthetic().task;
        std::memcpy(p.data(), &t, sizeof(t));
        w.section(GHOST_SEC_TASK, p, 0, sizeof(t) + 16);
    };
    const auto f = synthetic().files.back();
    ps.back() = [f](img::Writer& w) {
        Bytes p(sizeof(f.rec) + 8 + f.path.size());
        std::memcpy(p.data(), &f.rec, sizeof(f.rec));
        std::memcpy(p.data() + sizeof(f.rec) + 8, f.path.data(), f.path.size());
        w.section(GHOST_SEC_FILE, p, 0, sizeof(f.rec) + 8);
    };
    expect_synthetic(build(synthetic(), ps), 0);
}

TEST(ImageGrowth, LargerHeaderWithAZeroTailIsAccepted) {
    auto m = synthetic();
    m.header.header_size = 128;
    const auto b = encode(m);
    ASSERT_EQ(find(b, GHOST_SEC_TASK).at, 128u);
    auto r = img::read(b);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_TRUE(r->exact);
    EXPECT_EQ(r->header.header_size, 128u);
    EXPECT_EQ(encode(*r), b);
}

TEST(ImageGrowth, OlderSmallerMmRecordReadsAsZeroTail) {
    auto m = synthetic();
    m.header.features &= ~GHOST_IMAGE_FEAT_VDSO_ID;
    m.mm.vdso_size = m.mm.vdso_crc32c = 0;
    auto ps = pieces(m);
    ps[6] = [mm = m.mm](img::Writer& w) {
        w.section(GHOST_SEC_MM, rec_bytes(mm).first(GHOST_MM_SIZE_VER1), 0, GHOST_MM_SIZE_VER1);
    };
    auto r = img::read(build(m, ps));
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_FALSE(r->exact);
    EXPECT_EQ(std::memcmp(&r->mm, &m.mm, sizeof(m.mm)), 0);
}

TEST(ImageGrowth, Version1IsWrittenWithVersion1Records) {
    const auto m = version1(synthetic());
    const auto b = encode(m);
    EXPECT_EQ(find(b, GHOST_SEC_MM).size, GHOST_MM_SIZE_VER1);
    EXPECT_EQ(find(b, GHOST_SEC_FILE).size, GHOST_FILE_SIZE_VER1 + m.files[0].path.size());
    for (const auto& sec : walk(b))
        EXPECT_EQ(get<std::uint32_t>(b, sec.at + offsetof(ghost_section, flags)), 0u);
    auto r = img::read(b);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_TRUE(r->exact);
    EXPECT_EQ(encode(*r), b);
    const auto v2 = encode(synthetic());
    EXPECT_EQ(find(v2, GHOST_SEC_MM).size, sizeof(ghost_mm));
    EXPECT_EQ(get<std::uint16_t>(v2, find(v2, GHOST_SEC_MM).at + 6), sizeof(ghost_mm));
}

// ---- streams --------------------------------------------------------------------

TEST(ImageRead, TruncationAtEveryOffsetIsAnErrorNamingTheOffset) {
    const auto bytes = encode(synthetic());
    for (std::size_t len = 0; len < bytes.size(); len++) {
        auto r = img::read(std::span(bytes).first(len));
        ASSERT_FALSE(r) << len;
        ASSERT_EQ(r.error().code, std::errc::bad_message) << len;
        ASSERT_EQ(r.error().message, "the image ends early, at byte " + std::to_string(len));
    }
}

TEST(ImageRead, MaxBytesIsHonoured) {
    const auto bytes = encode(synthetic());
    img::ReadOptions o;
    o.max_bytes = bytes.size();
    EXPECT_TRUE(img::read(bytes, o));
    o.max_bytes = bytes.size() - 1;
    auto r = img::read(bytes, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, std::errc::file_too_large);
    EXPECT_NE(r.error().message.find("limit of"), std::string::npos) << r.error().message;
    o.max_bytes = 100;
    r = img::read(bytes, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, std::errc::file_too_large);
}

// Gives 1 to 7 bytes per call, and fails with @err after @fail_at bytes.
class Dribble final : public img::Source {
  public:
    Dribble(std::span<const std::byte> d, std::size_t fail_at = SIZE_MAX, int err = EIO)
        : d_(d), fail_at_(fail_at), err_(err) {}
    ghost::Result<std::size_t> read(std::span<std::byte> buf) override {
        if (off_ >= fail_at_)
            return ghost::Error::from_errno(err_, "the disk caught fire");
        const auto n = std::min({buf.size(), d_.size() - off_, 1 + calls_++ % 7, fail_at_ - off_});
        std::memcpy(buf.data(), d_.data() + off_, n);
        off_ += n;
        return n;
    }
    std::size_t consumed() const { return off_; }

  private:
    std::span<const std::byte> d_;
    std::size_t off_ = 0, calls_ = 0, fail_at_;
    int err_;
};

TEST(ImageRead, ShortReadsGiveTheSameImage) {
    const auto bytes = encode(synthetic());
    std::vector<Seen> a, b;
    auto whole = img::read(bytes, collect(a));
    Dribble src(bytes);
    auto dribbled = img::read(src, collect(b));
    ASSERT_TRUE(whole) << whole.error().what();
    ASSERT_TRUE(dribbled) << dribbled.error().what();
    EXPECT_EQ(encode(*whole), encode(*dribbled));
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); i++)
        EXPECT_EQ(a[i].data, b[i].data);
    EXPECT_EQ(src.consumed(), bytes.size());
}

TEST(ImageRead, SourceErrorsKeepTheirCode) {
    const auto bytes = encode(synthetic());
    Dribble src(bytes, 5000, EIO);
    auto r = img::read(src);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, std::error_code(EIO, std::system_category()));
    EXPECT_EQ(r.error().message, "the disk caught fire");
}

TEST(ImageRead, OnPagesErrorStopsTheRead) {
    const auto bytes = encode(synthetic());
    img::ReadOptions o;
    int calls = 0;
    o.on_pages = [&](const img::Vma&, const img::PageRun&,
                     std::span<const std::byte>) -> ghost::Result<void> {
        if (++calls == 2)
            return ghost::Error::from_errno(ENOSPC, "no room for the pages");
        return {};
    };
    auto r = img::read(bytes, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(r.error().code, std::error_code(ENOSPC, std::system_category()));
}

// Writes @bytes into @fd from a thread, @piece bytes at a time.
std::thread feed(int fd, const Bytes& bytes, std::size_t piece, int pause_us = 0) {
    return std::thread([fd, &bytes, piece, pause_us] {
        ghost::UniqueFd w(fd);
        for (std::size_t off = 0; off < bytes.size();) {
            const auto n =
                ::write(w.get(), bytes.data() + off, std::min(piece, bytes.size() - off));
            if (n <= 0)
                return;
            off += static_cast<std::size_t>(n);
            if (pause_us)
                usleep(pause_us);
        }
    });
}

TEST(ImageFdSource, PipeGivesWhatTheSpanGives) {
    const auto bytes = encode(synthetic());
    std::vector<Seen> a, b;
    auto from_span = img::read(bytes, collect(a));
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    ghost::UniqueFd rd(p[0]);
    auto t = feed(p[1], bytes, 1000);
    img::FdSource src(rd.get());
    auto from_pipe = img::read(src, collect(b));
    t.join();
    ASSERT_TRUE(from_span) << from_span.error().what();
    ASSERT_TRUE(from_pipe) << from_pipe.error().what();
    EXPECT_EQ(encode(*from_span), encode(*from_pipe));
    EXPECT_EQ(from_pipe->bytes, bytes.size());
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); i++) {
        EXPECT_EQ(a[i].addr, b[i].addr);
        EXPECT_EQ(a[i].data, b[i].data);
    }
}

// An image in a memory file (a regular file to lseek in), at offset 0.
ghost::UniqueFd image_file(const Bytes& bytes) {
    ghost::UniqueFd fd(memfd_create("image-test", MFD_CLOEXEC));
    EXPECT_TRUE(fd);
    EXPECT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(lseek(fd.get(), 0, SEEK_SET), 0);
    return fd;
}

// Reads bytes from a memory file, skipping page data when skip.
ghost::Result<img::Image> read_file(const Bytes& bytes, bool skip, off_t* end = nullptr) {
    auto fd = image_file(bytes);
    img::FdSource src(fd.get());
    img::ReadOptions o;
    o.skip_pages = skip;
    auto got = img::read(src, o);
    if (end)
        *end = lseek(fd.get(), 0, SEEK_CUR);
    return got;
}

// The synthetic image with one byte of its first page run flipped.
Bytes damaged_page() {
    auto bytes = encode(synthetic());
    const auto p = find(bytes, GHOST_SEC_PAGES);
    bytes[p.at + sizeof(ghost_section) + p.size - 1] ^= std::byte{1};
    return bytes;
}

bool says_checksum_mismatch(const ghost::Result<img::Image>& r) {
    return !r && std::string(r.error().what()).find("checksum mismatch") != std::string::npos;
}

TEST(ImageSkipPages, AFileIsReadWithoutItsPageDataAndUnchecked) {
    const auto bytes = encode(synthetic());
    off_t end = 0;
    auto got = read_file(bytes, true, &end);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_TRUE(got->unchecked);
    EXPECT_EQ(got->bytes, bytes.size());
    EXPECT_EQ(encode(*got), bytes); // every record, the same image
    // Not one byte past END: the offset is the image's end.
    EXPECT_EQ(end, static_cast<off_t>(bytes.size()));
}

TEST(ImageSkipPages, ASpanIsReadWithoutItsPageData) {
    const auto bytes = encode(synthetic());
    img::ReadOptions o;
    o.skip_pages = true;
    auto got = img::read(bytes, o);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_TRUE(got->unchecked);
    EXPECT_EQ(encode(*got), bytes);
    // Cut inside the page data: still an error naming where it ends.
    const auto p = find(bytes, GHOST_SEC_PAGES);
    const Bytes cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(p.at + 100));
    EXPECT_FALSE(img::read(cut, o));
}

TEST(ImageSkipPages, ADamagedPageGoesUnseenSkippedAndIsCaughtRead) {
    const auto bytes = damaged_page();
    auto skipped = read_file(bytes, true);
    ASSERT_TRUE(skipped) << skipped.error().what();
    EXPECT_TRUE(skipped->unchecked);
    EXPECT_TRUE(says_checksum_mismatch(read_file(bytes, false)));
}

TEST(ImageSkipPages, APipeIsReadWholeAndChecked) {
    const auto bytes = damaged_page();
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ghost::UniqueFd rd(fds[0]);
    auto t = feed(fds[1], bytes, 1000);
    img::FdSource src(rd.get());
    img::ReadOptions o;
    o.skip_pages = true;
    auto got = img::read(src, o);
    t.join();
    EXPECT_TRUE(says_checksum_mismatch(got));
}

TEST(ImageFdSource, NonBlockingPipeIsWaitedFor) {
    const auto bytes = encode(synthetic());
    int p[2];
    ASSERT_EQ(pipe2(p, O_NONBLOCK), 0);
    ghost::UniqueFd rd(p[0]);
    auto t = feed(p[1], bytes, 4000, 2000);
    img::FdSource src(rd.get());
    auto r = img::read(src);
    t.join();
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->bytes, bytes.size());
}

std::atomic<int> g_interrupts{0};

TEST(ImageFdSource, RetriesAfterEintr) {
    // A handler without SA_RESTART makes a blocked read(2) fail with EINTR.
    struct sigaction sa {
    }, old{};
    sa.sa_handler = [](int) { g_interrupts++; };
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    const auto bytes = encode(synthetic());
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    ghost::UniqueFd rd(p[0]), wr(p[1]);
    std::atomic<bool> reading{false};
    ghost::Result<img::Image> r = ghost::Error{};
    std::thread t([&] {
        reading = true;
        img::FdSource src(rd.get());
        r = img::read(src);
    });
    while (!reading)
        usleep(1000);
    for (int i = 0; i < 5; i++) {
        usleep(20000); // blocked in read() on the empty pipe by now
        pthread_kill(t.native_handle(), SIGUSR1);
    }
    usleep(20000);
    const int before = g_interrupts;
    std::size_t off = 0;
    while (off < bytes.size()) {
        const auto n = ::write(wr.get(), bytes.data() + off, bytes.size() - off);
        ASSERT_GT(n, 0);
        off += static_cast<std::size_t>(n);
    }
    wr.reset();
    t.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_EQ(before, 5);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->bytes, bytes.size());
}

TEST(ImageFdSource, ReadErrorIsReported) {
    img::FdSource src(-1);
    auto r = img::read(src);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, std::error_code(EBADF, std::system_category()));
}

// ---- hostile sizes ---------------------------------------------------------------

// A mapping as large as user space that claims every page, then one run of
// all of them, and the stream ends: the reader must not try to hold them.
TEST(ImageRead, HugeRunInHugeMappingEndsEarlyWithoutAllocatingIt) {
    auto m = synthetic();
    m.vmas.resize(1);
    auto& v = m.vmas[0];
    v.rec = {};
    v.path.clear();
    v.rec.start = kPage;
    v.rec.end = kUserEnd;
    v.rec.prot = PROT_READ;
    v.rec.nr_pages = (kUserEnd - kPage) / kPage;
    v.runs.clear();
    m.mm.nr_vmas = 1;
    m.files.clear();
    auto ps = pieces(m);
    ps.push_back([&](img::Writer& w) {
        // The record of a run of all pages, and one page of them.
        const auto at = w.bytes().size();
        w.pages(v.rec.start, pattern(v.rec.start, 1));
        auto& b = w.bytes();
        put<std::uint64_t>(b, at + sizeof(ghost_section) + offsetof(ghost_pages, nr_pages),
                           v.rec.nr_pages);
        const auto off =
            get<std::uint32_t>(b, at + sizeof(ghost_section) + offsetof(ghost_pages, data_offset));
        put<std::uint64_t>(b, at + offsetof(ghost_section, size), off + v.rec.nr_pages * kPage);
    });
    const auto bytes = build(m, ps, false);
    std::size_t largest = 0;
    img::ReadOptions o;
    o.on_pages = [&](const img::Vma&, const img::PageRun&,
                     std::span<const std::byte> d) -> ghost::Result<void> {
        largest = std::max(largest, d.size());
        return {};
    };
    auto r = img::read(bytes, o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("ends early"), std::string::npos) << r.error().message;
    EXPECT_EQ(largest, 0u); // the first chunk was never complete
}

// ---- real images ----------------------------------------------------------------

// tests/golden/vN/ holds real images of format version N that ghost wrote
// (tests/golden/README.md says how they were made): each must still be read
// and re-encode byte for byte, in the version it was written in.
void read_and_reencode_goldens(std::uint32_t version, int at_least) {
    const std::filesystem::path dir =
        std::filesystem::path(GHOST_GOLDEN_DIR) / ("v" + std::to_string(version));
    int seen = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".img")
            continue;
        SCOPED_TRACE(e.path().string());
        std::ifstream in(e.path(), std::ios::binary);
        std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto bytes = std::as_bytes(std::span(raw));
        std::map<std::uint64_t, Bytes> data; // page address -> contents
        img::ReadOptions o;
        o.on_pages = [&](const img::Vma&, const img::PageRun& r,
                         std::span<const std::byte> d) -> ghost::Result<void> {
            for (std::uint64_t i = 0; i < r.nr_pages; i++)
                data[r.addr + i * kPage] =
                    Bytes(d.begin() + i * kPage, d.begin() + (i + 1) * kPage);
            return {};
        };
        auto r = img::read(bytes, o);
        ASSERT_TRUE(r) << r.error().what();
        EXPECT_EQ(r->header.version, version);
        EXPECT_EQ(r->bytes, bytes.size());
        EXPECT_GT(r->pages(), 0u);
        EXPECT_EQ(data.size(), r->pages());
        EXPECT_FALSE(r->vmas.empty());
        Bytes buf;
        const auto again = img::encode(*r, [&](const img::Vma&, const img::PageRun& run) {
            buf.clear();
            for (std::uint64_t i = 0; i < run.nr_pages; i++) {
                const auto& p = data.at(run.addr + i * kPage);
                buf.insert(buf.end(), p.begin(), p.end());
            }
            return std::span<const std::byte>(buf);
        });
        EXPECT_TRUE(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()))
            << "re-encoding differs";
        seen++;
    }
    EXPECT_GE(seen, at_least) << dir << " holds too few images";
}

TEST(ImageCorpus, Version1ImagesReadAndReencodeByteForByte) {
    read_and_reencode_goldens(1, 4);
}

TEST(ImageCorpus, Version2ImagesReadAndReencodeByteForByte) {
    read_and_reencode_goldens(2, 4);
}

} // namespace
