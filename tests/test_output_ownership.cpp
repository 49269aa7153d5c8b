// Output files are the run's own (io/atomic_write.hpp, io/output_lock.hpp, io/output_names.hpp):
// temporary names unique and exclusive, a final name taken without replacing what is not the
// run's, the lock of a live run refusing a second one and a stale lock taken over.
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "io/atomic_write.hpp"
#include "io/output_lock.hpp"
#include "io/output_names.hpp"

namespace fs = std::filesystem;
using namespace minilst;

namespace {

const fs::path root = fs::temp_directory_path() / ("minilst_ownership_" + std::to_string(::getpid()));
struct RemoveRoot {  // the scratch directories go with the program
  ~RemoveRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
} remove_root;

fs::path scratch(const std::string& name) {
  const auto dir = root / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const std::string& path, const std::string& text) { write_file_atomically(path, text.data(), text.size()); }

// The temporary files left in dir (none after any write, failed or not).
int partial_files(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".partial";
  return n;
}

// A pid that names no process: a child that has ended and been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace

TEST(OutputNames, UniqueTemporaryNamesAndSiblings) {
  const std::regex suffix("\\.[A-Za-z0-9_-]+-[0-9]+-[0-9a-f]{8}\\.partial");
  EXPECT_TRUE(std::regex_match(unique_partial_suffix(), suffix)) << unique_partial_suffix();
  EXPECT_NE(unique_partial_suffix(), unique_partial_suffix());
  EXPECT_EQ(process_tag(), host_tag() + "-" + std::to_string(::getpid()));
  EXPECT_EQ(sibling_path("m.h5", "n1-42"), "m.n1-42.h5");
  EXPECT_EQ(sibling_path("out/m.h5", "n1-42", 2), "out/m.n1-42-2.h5");
  EXPECT_EQ(sibling_path("metrics", "n1-42"), "metrics.n1-42");
  EXPECT_EQ(json_summary_path(sibling_path("m.h5", "n1-42")), "m.n1-42.json");
  EXPECT_EQ(lock_path_of("m.h5"), "m.h5.lock");
}

TEST(AtomicWrite, ReplacesOnlyWhatTheRunWroteOrWasAllowed) {
  const auto dir = scratch("replace");
  const std::string path = (dir / "m.json").string();
  write(path, "first");
  write(path, "second");  // its own file: replaced
  EXPECT_EQ(read_text(path), "second");
  EXPECT_TRUE(may_write(path));

  std::ofstream(path) << "a user's notes";  // written over in place: no longer the run's
  EXPECT_FALSE(may_write(path));
  EXPECT_THROW(write(path, "third"), OutputTaken);
  EXPECT_EQ(read_text(path), "a user's notes");

  const std::string other = (dir / "other.json").string();
  std::ofstream(other) << "an earlier run's";
  EXPECT_THROW(write(other, "new"), OutputTaken);  // not approved: kept
  EXPECT_EQ(read_text(other), "an earlier run's");
  allow_replacing(other, file_id(other));
  write(other, "new");  // approved: replaced
  EXPECT_EQ(read_text(other), "new");
  EXPECT_EQ(partial_files(dir), 0);
}

TEST(AtomicWrite, ANewFileAtTheNameIsNeverReplaced) {
  const auto dir = scratch("new_file");
  const std::string path = (dir / "m.h5").string();
  write(path, "run");
  fs::remove(path);
  std::ofstream(dir / "user") << "the user's";
  fs::rename(dir / "user", path);  // another file under the name
  try {
    write(path, "run again");
    ADD_FAILURE() << "replaced a file put there during the run";
  } catch (const OutputTaken& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("not this run's to replace"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(path), "the user's");
  EXPECT_EQ(partial_files(dir), 0);
}

TEST(AtomicWrite, RenameNeverReplaces) {
  const auto dir = scratch("noreplace");
  const std::string from = (dir / "a").string(), to = (dir / "b").string();
  std::ofstream(from) << "a";
  std::ofstream(to) << "b";
  EXPECT_EQ(rename_noreplace(from, to), EEXIST);
  EXPECT_EQ(read_text(from), "a");
  EXPECT_EQ(read_text(to), "b");
  fs::remove(to);
  EXPECT_EQ(rename_noreplace(from, to), 0);
  EXPECT_EQ(read_text(to), "a");
  EXPECT_FALSE(fs::exists(from));
}

TEST(AtomicWrite, RemovesOnlyItsOwnFile) {
  const auto dir = scratch("remove");
  const std::string mine = (dir / "mine.h5").string(), theirs = (dir / "theirs.h5").string();
  write(mine, "run");
  EXPECT_TRUE(remove_if_owned(mine));
  EXPECT_FALSE(fs::exists(mine));
  write(theirs, "run");
  std::ofstream(theirs) << "the user's";
  EXPECT_FALSE(remove_if_owned(theirs));
  EXPECT_EQ(read_text(theirs), "the user's");
}

TEST(AtomicWrite, FilesNoRunMayReplace) {
  const auto dir = scratch("problems");
  const std::string path = (dir / "m.h5").string();
  EXPECT_EQ(replace_problem(path), "");  // absent
  std::ofstream(path) << "x";
  EXPECT_EQ(replace_problem(path), "");  // this user's, in a plain directory
  const int fd = ::open(path.c_str(), O_RDONLY);
  int flags = 0;
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags |= FS_IMMUTABLE_FL, ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0)) {
    EXPECT_NE(replace_problem(path).find("is immutable"), std::string::npos) << replace_problem(path);
    flags &= ~FS_IMMUTABLE_FL;
    ::ioctl(fd, FS_IOC_SETFLAGS, &flags);
  } else {
    std::printf("chattr +i not allowed here: the immutable check is not exercised\n");
  }
  ::close(fd);
  if (::geteuid() == 0) {
    fs::permissions(dir, fs::perms::all | fs::perms::sticky_bit);
    ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
    EXPECT_NE(replace_problem(path).find("in the sticky directory"), std::string::npos) << replace_problem(path);
  }
}

TEST(AtomicWrite, TemporaryFilesOfDeadRunsAreRemoved) {
  const auto dir = scratch("stale_partials");
  const std::string path = (dir / "m.h5").string();
  const std::string dead = path + "." + host_tag() + "-" + std::to_string(dead_pid()) + "-0123abcd.partial";
  const std::string live = path + "." + process_tag() + "-0123abcd.partial";
  const std::string elsewhere = path + ".otherhost-1-0123abcd.partial";
  for (const auto& p : {dead, live, elsewhere}) std::ofstream(p) << "x";
  EXPECT_EQ(remove_stale_partials(path), 1);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(elsewhere));
}

TEST(OutputLock, OneLiveRunPerName) {
  const auto dir = scratch("lock");
  const std::string output = (dir / "m.h5").string();
  {
    OutputLock first;
    ASSERT_EQ(first.acquire(output), "");
    EXPECT_NE(read_text(lock_path_of(output)).find("pid=" + std::to_string(::getpid())), std::string::npos);
    OutputLock second;
    const auto refused = second.acquire(output);
    EXPECT_NE(refused.find("being written by another miniLST run"), std::string::npos) << refused;
    EXPECT_NE(refused.find("pid " + std::to_string(::getpid())), std::string::npos) << refused;
    EXPECT_FALSE(second.held());
  }
  EXPECT_FALSE(fs::exists(lock_path_of(output)));  // released
  EXPECT_EQ(partial_files(dir), 0);
}

TEST(OutputLock, StaleLocksAreTakenOverOthersAreNot) {
  const auto dir = scratch("stale_lock");
  const std::string output = (dir / "m.h5").string(), lock = lock_path_of(output);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::ofstream(lock) << "minilst-lock host=" << host << " pid=" << dead_pid() << " started=x\n";
  {
    OutputLock l;
    EXPECT_EQ(l.acquire(output), "");  // its process is gone
  }
  std::ofstream(lock) << "minilst-lock host=" << host << " pid=" << ::getppid() << " pid_start=1 started=x\n";
  {
    OutputLock l;
    EXPECT_EQ(l.acquire(output), "");  // its pid now names another process
  }
  std::ofstream(lock) << "minilst-lock host=some-other-node pid=1 started=x\n";
  {
    OutputLock l;
    const auto refused = l.acquire(output);
    EXPECT_NE(refused.find("if that run has ended, remove"), std::string::npos) << refused;
  }
  std::ofstream(lock) << "not a lock";
  {
    OutputLock l;
    EXPECT_NE(l.acquire(output).find("names no miniLST run"), std::string::npos);
  }
  EXPECT_EQ(read_text(lock), "not a lock");
}
