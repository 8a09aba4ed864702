package org.apache.spark.examples

import java.util.Random

import org.apache.spark.sql.SparkSession
import org.apache.spark.storage.StorageLevel

/** An iterative, memory-bound job: logistic regression by gradient descent over points held in the
  * executors' memory, every iteration one pass over all of them.
  * Arguments: points (default 10000), dimensions (default 10), iterations (default 5), partitions (default 2).
  * Prints the final weights' norm. */
object SparkLR {
  def main(args: Array[String]): Unit = {
    val session = SparkSession.builder().appName("Spark LR").getOrCreate()
    val points = args.lift(0).map(_.toInt).getOrElse(10000)
    val dimensions = args.lift(1).map(_.toInt).getOrElse(10)
    val iterations = args.lift(2).map(_.toInt).getOrElse(5)
    val partitions = args.lift(3).map(_.toInt).getOrElse(2)
    val perPartition = math.max(points / partitions, 1)
    val data = session.sparkContext
      .parallelize(0 until partitions, partitions)
      .flatMap { partition =>
        val random = new Random(partition)
        Iterator.fill(perPartition) {
          val label = if (random.nextBoolean()) 1.0 else -1.0
          val features = Array.fill(dimensions)(random.nextGaussian() + label * 0.7)
          (label, features)
        }
      }
      .persist(StorageLevel.MEMORY_ONLY)
    val weights = Array.fill(dimensions)(2 * new Random(42).nextDouble() - 1)
    for (_ <- 1 to iterations) {
      val current = weights.clone()
      val gradient = data
        .map { case (label, features) =>
          var dot = 0.0
          var i = 0
          while (i < dimensions) { dot += current(i) * features(i); i += 1 }
          val scale = (1 / (1 + math.exp(-label * dot)) - 1) * label
          features.map(_ * scale)
        }
        .reduce { (a, b) =>
          var i = 0
          while (i < dimensions) { a(i) += b(i); i += 1 }
          a
        }
      var i = 0
      while (i < dimensions) { weights(i) -= gradient(i); i += 1 }
    }
    println(s"Weights' norm: ${math.sqrt(weights.map(w => w * w).sum)}")
    session.stop()
  }
}
