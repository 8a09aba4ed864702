package org.apache.spark.examples

import java.util.Random

import org.apache.spark.sql.SparkSession

/** A shuffle-heavy job: every round, each mapper makes key-value pairs of random bytes and all of them are
  * grouped by key across the reducers, so every value crosses a shuffle (written to and read from local disk).
  * Arguments: mappers (default 2), pairs per mapper (default 10000), bytes per value (default 1000),
  * reducers (default: the mappers), rounds (default 1). Prints the groups of the last round. */
object GroupByTest {
  def main(args: Array[String]): Unit = {
    val session = SparkSession.builder().appName("GroupBy Test").getOrCreate()
    val mappers = args.lift(0).map(_.toInt).getOrElse(2)
    val pairs = args.lift(1).map(_.toInt).getOrElse(10000)
    val valueBytes = args.lift(2).map(_.toInt).getOrElse(1000)
    val reducers = args.lift(3).map(_.toInt).getOrElse(mappers)
    val rounds = args.lift(4).map(_.toInt).getOrElse(1)
    val keys = math.max(pairs / 4, 1)
    val data = session.sparkContext.parallelize(0 until mappers, mappers).flatMap { mapper =>
      val random = new Random(mapper)
      Iterator.fill(pairs) {
        val value = new Array[Byte](valueBytes)
        random.nextBytes(value)
        (random.nextInt(keys), value)
      }
    }
    var groups = 0L
    for (_ <- 1 to rounds) {
      groups = data.groupByKey(reducers).count()
    }
    println(s"Groups: $groups")
    session.stop()
  }
}
