"""Writing a seed corpus, shared by the tests/fuzz/make_*_corpus.py scripts (standard library only)."""
import os


def write_corpus(out, files):
    """Writes files ({name: bytes}) into the folder out, in name order, replacing only those names."""
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name in files:
            os.remove(os.path.join(out, name))
    for name, data in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), out))
