// Readers for the data formats users have: IDX (MNIST, Fashion-MNIST) and CSV.
#pragma once

#include <string>

#include "engine/data/dataset.h"

namespace memgrad::data {

// Reads an IDX file (optionally gzip-compressed: a ".gz" name or the gzip magic bytes). uint8
// data becomes float32 scaled by `scale` (1/255 for images) unless as_labels, which gives int64.
// Throws CheckpointError for a missing, truncated or malformed file (naming the path, the
// expected and actual sizes).
Tensor read_idx(const std::string& path, bool as_labels = false, double scale = 1.0 / 255.0);

// The four MNIST-format files in `dir` (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte): images flattened to (N, 784) float32 in
// [0, 1], labels int64. Throws CheckpointError naming a missing file.
struct MnistSplit {
  TensorDataset train;
  TensorDataset test;
};
MnistSplit load_mnist(const std::string& dir);

// Reads a CSV file of numbers: every column but `label_column` (negative: counted from the end)
// becomes a float32 feature, the label column int64. Throws CheckpointError naming the line and
// column for ragged rows, empty fields (a trailing comma), non-numeric or non-finite features,
// NUL bytes, and labels that are not whole numbers >= 0.
TensorDataset read_csv(const std::string& path, bool has_header = false, int label_column = -1);

}  // namespace memgrad::data
