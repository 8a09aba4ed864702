package org.apache.spark.examples

import org.apache.spark.sql.SparkSession

/** Estimates pi by throwing darts at the unit square: the share inside the quarter circle is pi / 4.
  * Arguments: the number of partitions (default 2), each throwing 100000 darts, and the milliseconds each
  * partition's task waits before it throws (default 0), so that a run can be made to last. */
object SparkPi {
  def main(args: Array[String]): Unit = {
    val session = SparkSession.builder().appName("Spark Pi").getOrCreate()
    val partitions = args.headOption.map(_.toInt).getOrElse(2)
    val pause = args.lift(1).map(_.toLong).getOrElse(0L)
    val darts = math.min(100000L * partitions, Int.MaxValue.toLong).toInt
    val hits = session.sparkContext
      .parallelize(0 until darts, partitions)
      .mapPartitions { throws => Thread.sleep(pause); throws }
      .filter { _ =>
        val (x, y) = (2 * math.random() - 1, 2 * math.random() - 1)
        x * x + y * y <= 1
      }
      .count()
    println(s"Pi is roughly ${4.0 * hits / darts}")
    session.stop()
  }
}
